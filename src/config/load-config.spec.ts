import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { IsOptional, MinLength } from 'class-validator';
import { configKeys, ConfigValidationError, loadConfig } from '../app.config.js';
import { ConfigSection, configSections } from './config-section.js';
import { Env, envVariablesOf, IntEnv } from './env.decorators.js';
import { envKeysOf } from './load-config.js';
import { DatabaseConfig } from '../database/database.config.js';
import { ExamplesConfig } from '../tools/examples/examples.config.js';
import { LifecycleConfig } from '../lifecycle/lifecycle.config.js';
import { MetricsConfig } from '../metrics/metrics.config.js';
import { PrincipalsConfig } from '../principals/principals.config.js';
import { ServerConfig } from './server.config.js';
import { ToolsConfig } from '../tools/tools.config.js';

describe('loadConfig', () => {
  it('applies the documented defaults to an empty environment', () => {
    const c = loadConfig({});
    expect(c.get(ServerConfig).PORT).toBe(3000);
    expect(c.get(ServerConfig).HOST).toBe('127.0.0.1');
    expect(c.get(DatabaseConfig).DATA_DIR).toBe('./.data');
    expect(c.get(DatabaseConfig).DB_MIGRATIONS_RUN).toBe(true);
    expect(c.get(ServerConfig).HTTP_BODY_LIMIT).toBe('4mb');
    expect(c.get(ServerConfig).bodyLimitBytes).toBe(4 * 1024 * 1024);
    expect(c.get(LifecycleConfig).SHUTDOWN_GRACE_MS).toBe(10000);
    expect(c.get(DatabaseConfig).DATABASE_URL).toBeUndefined();
    expect(c.get(ServerConfig).CORS_ORIGINS).toEqual([]);
  });

  it('converts numbers, booleans, sizes and lists', () => {
    const c = loadConfig({
      PORT: '8080',
      DB_MIGRATIONS_RUN: 'false',
      HTTP_BODY_LIMIT: '512kb',
      CORS_ORIGINS: 'https://a.example, https://b.example',
    });
    expect(c.get(ServerConfig).PORT).toBe(8080);
    expect(c.get(DatabaseConfig).DB_MIGRATIONS_RUN).toBe(false);
    expect(c.get(ServerConfig).bodyLimitBytes).toBe(512 * 1024);
    expect(c.get(ServerConfig).CORS_ORIGINS).toEqual(['https://a.example', 'https://b.example']);
  });

  it('treats an empty variable as unset', () => {
    expect(loadConfig({ PORT: '', DATABASE_URL: ' ' }).get(ServerConfig).PORT).toBe(3000);
  });

  it('names every bad variable in one error', () => {
    let caught: unknown;
    try {
      loadConfig({ PORT: 'abc', LOG_LEVEL: 'loud', DB_MIGRATIONS_RUN: 'maybe', DATABASE_URL: 'mysql://x' });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigValidationError);
    const problems = (caught as ConfigValidationError).problems.join('\n');
    expect(problems).toMatch(/PORT/);
    expect(problems).toMatch(/LOG_LEVEL/);
    expect(problems).toMatch(/DB_MIGRATIONS_RUN/);
    expect(problems).toMatch(/DATABASE_URL/);
    expect((caught as ConfigValidationError).problems).toHaveLength(4);
  });

  it('rejects out-of-range ports and malformed sizes', () => {
    expect(() => loadConfig({ PORT: '70000' })).toThrow(/PORT/);
    expect(() => loadConfig({ HTTP_BODY_LIMIT: 'lots' })).toThrow(/HTTP_BODY_LIMIT/);
  });

  describe('auth settings', () => {
    const oidc = {
      AUTH_PROVIDERS: 'oidc',
      OIDC_ISSUER: 'https://login.example.com/realms/corp',
      MCP_RESOURCE_URL: 'https://mcp.example.com/mcp',
    };

    it('defaults to no providers, asymmetric algorithms and the standard proxy headers', () => {
      const c = loadConfig({});
      expect(c.get(PrincipalsConfig).AUTH_PROVIDERS).toEqual([]);
      expect(c.get(PrincipalsConfig).OIDC_ALGORITHMS).toContain('RS256');
      expect(c.get(PrincipalsConfig).OIDC_ALGORITHMS.some((a) => a.startsWith('HS') || a === 'none')).toBe(
        false,
      );
      expect(c.get(PrincipalsConfig).OIDC_CLOCK_SKEW_S).toBe(60);
      expect(c.get(PrincipalsConfig).AUTH_PROXY_USER_HEADER).toBe('x-forwarded-user');
      expect(c.get(MetricsConfig).METRICS_TOKEN).toBeUndefined();
    });

    it('takes the audience from MCP_RESOURCE_URL unless OIDC_AUDIENCE is set', () => {
      expect(loadConfig(oidc).get(PrincipalsConfig).oidcAudiences).toEqual(['https://mcp.example.com/mcp']);
      expect(
        loadConfig({ ...oidc, OIDC_AUDIENCE: 'api://mcp, mcp' }).get(PrincipalsConfig).oidcAudiences,
      ).toEqual(['api://mcp', 'mcp']);
    });

    it('refuses unknown providers, HMAC and none algorithms, and bad header names', () => {
      expect(() => loadConfig({ AUTH_PROVIDERS: 'oidc,ldap' })).toThrow(
        /AUTH_PROVIDERS must be a comma list/,
      );
      expect(() => loadConfig({ OIDC_ALGORITHMS: 'RS256,HS256' })).toThrow(/OIDC_ALGORITHMS/);
      expect(() => loadConfig({ OIDC_ALGORITHMS: 'none' })).toThrow(/OIDC_ALGORITHMS/);
      expect(() => loadConfig({ AUTH_PROXY_USER_HEADER: 'x user' })).toThrow(/AUTH_PROXY_USER_HEADER/);
      expect(
        loadConfig({ AUTH_PROXY_USER_HEADER: 'X-Auth-Request-User' }).get(PrincipalsConfig)
          .AUTH_PROXY_USER_HEADER,
      ).toBe('x-auth-request-user');
    });

    it('needs OIDC_ISSUER and MCP_RESOURCE_URL for oidc, naming both in one error', () => {
      let caught: unknown;
      try {
        loadConfig({ AUTH_PROVIDERS: 'oidc' });
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ConfigValidationError);
      expect((caught as ConfigValidationError).problems).toEqual([
        'OIDC_ISSUER is required when AUTH_PROVIDERS includes oidc',
        'MCP_RESOURCE_URL is required when AUTH_PROVIDERS includes oidc (the resource tokens are issued for)',
      ]);
      expect(loadConfig(oidc).get(PrincipalsConfig).AUTH_PROVIDERS).toEqual(['oidc']);
    });

    it('needs a proxy secret of at least 16 characters for proxy', () => {
      expect(() => loadConfig({ AUTH_PROVIDERS: 'proxy' })).toThrow(
        /AUTH_PROXY_SECRET is required when AUTH_PROVIDERS includes proxy/,
      );
      expect(() => loadConfig({ AUTH_PROVIDERS: 'proxy', AUTH_PROXY_SECRET: 'short' })).toThrow(
        /AUTH_PROXY_SECRET must be at least 16 characters/,
      );
      expect(
        loadConfig({ AUTH_PROVIDERS: 'proxy', AUTH_PROXY_SECRET: 'x'.repeat(16) }).get(PrincipalsConfig)
          .AUTH_PROVIDERS,
      ).toEqual(['proxy']);
    });

    it('reads OIDC_REQUIRED_TYP as at+jwt, with or without the application/ prefix', () => {
      expect(loadConfig({}).get(PrincipalsConfig).OIDC_REQUIRED_TYP).toBeUndefined();
      expect(loadConfig({ OIDC_REQUIRED_TYP: 'AT+JWT' }).get(PrincipalsConfig).OIDC_REQUIRED_TYP).toBe(
        'at+jwt',
      );
      expect(
        loadConfig({ OIDC_REQUIRED_TYP: 'application/at+jwt' }).get(PrincipalsConfig).OIDC_REQUIRED_TYP,
      ).toBe('at+jwt');
      expect(() => loadConfig({ OIDC_REQUIRED_TYP: 'JWT' })).toThrow(/OIDC_REQUIRED_TYP must be at\+jwt/);
    });
  });

  describe('production posture', () => {
    const safe = {
      NODE_ENV: 'production',
      HOST: '0.0.0.0',
      DATABASE_URL: 'postgres://mcp@db.internal/mcp',
      AUTH_PROVIDERS: 'oidc,apikey',
      OIDC_ISSUER: 'https://login.example.com/realms/corp',
      MCP_RESOURCE_URL: 'https://mcp.example.com/mcp',
      METRICS_TOKEN: 'scrape-token-0123456789',
    };

    function problemsOf(env: Record<string, string>): string[] {
      try {
        loadConfig(env);
      } catch (err) {
        if (err instanceof ConfigValidationError) return err.problems;
        throw err;
      }
      return [];
    }

    it('accepts a safe production configuration', () => {
      expect(loadConfig(safe).get(ServerConfig).isProduction).toBe(true);
    });

    it('lists every unsafe setting in one error', () => {
      const problems = problemsOf({
        NODE_ENV: 'production',
        HOST: '0.0.0.0',
        OIDC_ISSUER: 'http://login.example.com/realms/corp',
        OIDC_JWKS_URI: 'http://login.example.com/jwks',
        OIDC_JWKS_COOLDOWN_MS: '0',
        MCP_CONFORMANCE_FIXTURES: 'true',
        PORT: 'abc',
      });
      expect(problems).toEqual([
        expect.stringMatching(/^PORT must be an integer/),
        // The cross-variable rules come by module (database, metrics, principals, tools), after the schema's.
        expect.stringMatching(/^DATABASE_URL is required when NODE_ENV=production/),
        expect.stringMatching(/^METRICS_TOKEN is required when NODE_ENV=production .*METRICS_PUBLIC=true/),
        expect.stringMatching(/^AUTH_PROVIDERS must name at least one .* HOST=0\.0\.0\.0 is not a loopback/),
        expect.stringMatching(/^MCP_RESOURCE_URL is required when NODE_ENV=production/),
        expect.stringMatching(/^OIDC_ISSUER must be an https URL/),
        expect.stringMatching(/^OIDC_JWKS_URI must be an https URL/),
        expect.stringMatching(/^OIDC_JWKS_COOLDOWN_MS must not be 0/),
        expect.stringMatching(/^MCP_CONFORMANCE_FIXTURES must be false/),
      ]);
    });

    it('allows no provider on a loopback HOST only (an authenticating sidecar in front)', () => {
      const { AUTH_PROVIDERS: _, OIDC_ISSUER: __, ...noAuth } = safe;
      for (const host of ['127.0.0.1', '127.0.0.2', 'localhost', '::1']) {
        expect(problemsOf({ ...noAuth, HOST: host })).toEqual([]);
      }
      expect(problemsOf({ ...noAuth, HOST: '10.0.0.5' })).toEqual([
        expect.stringMatching(/^AUTH_PROVIDERS must name at least one/),
      ]);
    });

    it('serves /metrics openly only when METRICS_PUBLIC=true says so', () => {
      const { METRICS_TOKEN: _, ...noToken } = safe;
      expect(problemsOf(noToken)).toEqual([expect.stringMatching(/^METRICS_TOKEN is required/)]);
      expect(problemsOf({ ...noToken, METRICS_PUBLIC: 'true' })).toEqual([]);
    });

    it('allows plain http for the issuer and JWKS on loopback only', () => {
      expect(
        problemsOf({
          ...safe,
          OIDC_ISSUER: 'http://127.0.0.1:8080/realms/x',
          OIDC_JWKS_URI: 'http://localhost/j',
        }),
      ).toEqual([]);
    });

    it('refuses a METRICS_TOKEN shorter than 16 characters, as the other bearer secrets', () => {
      expect(problemsOf({ ...safe, METRICS_TOKEN: 'change-me' })).toEqual([
        'METRICS_TOKEN must be at least 16 characters',
      ]);
    });

    it('turns the example tools off unless EXAMPLE_TOOLS=true asks for them', () => {
      expect(loadConfig(safe).get(ExamplesConfig).EXAMPLE_TOOLS).toBe(false);
      expect(loadConfig({ ...safe, EXAMPLE_TOOLS: 'true' }).get(ExamplesConfig).EXAMPLE_TOOLS).toBe(true);
      expect(loadConfig({}).get(ExamplesConfig).EXAMPLE_TOOLS).toBe(true);
      expect(loadConfig({ NODE_ENV: 'test' }).get(ExamplesConfig).EXAMPLE_TOOLS).toBe(true);
      expect(loadConfig({ EXAMPLE_TOOLS: 'false' }).get(ExamplesConfig).EXAMPLE_TOOLS).toBe(false);
    });

    it('holds tools that serve nothing to the schema only, not to the HTTP server refusals', () => {
      const image = { NODE_ENV: 'production', HOST: '0.0.0.0', DATABASE_URL: 'postgres://mcp@db/mcp' };
      expect(problemsOf(image)).toEqual([
        expect.stringMatching(/^METRICS_TOKEN is required/),
        expect.stringMatching(/^AUTH_PROVIDERS must name/),
        expect.stringMatching(/^MCP_RESOURCE_URL is required/),
      ]);
      expect(loadConfig(image, { serving: false }).get(ServerConfig).isProduction).toBe(true);
      // A malformed variable is still refused.
      expect(() => loadConfig({ ...image, PORT: 'abc' }, { serving: false })).toThrow(
        /PORT must be an integer/,
      );
    });

    it('leaves development alone', () => {
      expect(loadConfig({ HOST: '0.0.0.0', OIDC_JWKS_COOLDOWN_MS: '0' }).get(ServerConfig).isProduction).toBe(
        false,
      );
    });
  });

  it('reads MCP_CONFORMANCE_FIXTURES as a boolean, off by default', () => {
    expect(loadConfig({}).get(ToolsConfig).MCP_CONFORMANCE_FIXTURES).toBe(false);
    expect(loadConfig({ MCP_CONFORMANCE_FIXTURES: 'true' }).get(ToolsConfig).MCP_CONFORMANCE_FIXTURES).toBe(
      true,
    );
    expect(() => loadConfig({ MCP_CONFORMANCE_FIXTURES: 'sometimes' })).toThrow(
      /MCP_CONFORMANCE_FIXTURES must be true or false/,
    );
  });
});

describe('config sections', () => {
  // Declared here only: no key list, no loader change, no registration call besides its own decorator.
  @ConfigSection<ProbeConfig>({
    module: 'zz-probe',
    summary: 'A module added by this test.',
    checks: (c, ctx) =>
      c.PROBE_LIMIT > 5 && ctx.get(ServerConfig).isProduction
        ? ['PROBE_LIMIT must be at most 5 in production']
        : [],
  })
  class ProbeConfig {
    @Env('a probe limit')
    @IntEnv(0, 10)
    PROBE_LIMIT = 1;

    @Env('an optional probe setting (no default)')
    @IsOptional()
    @MinLength(3, { message: 'PROBE_OPTIONAL must be at least 3 characters' })
    PROBE_OPTIONAL?: string;
  }

  it('reads a new decorated variable, optional ones included, without it being listed anywhere else', () => {
    const c = loadConfig({ PROBE_LIMIT: '7', PROBE_OPTIONAL: 'abcd' }).get(ProbeConfig);
    expect(c.PROBE_LIMIT).toBe(7);
    expect(c.PROBE_OPTIONAL).toBe('abcd');
    expect(loadConfig({}).get(ProbeConfig).PROBE_OPTIONAL).toBeUndefined();
    expect(configKeys()).toEqual(expect.arrayContaining(['PROBE_LIMIT', 'PROBE_OPTIONAL', 'PORT']));
  });

  it("reports a new module's problems in the same one message as every other module's", () => {
    let caught: unknown;
    try {
      loadConfig({ PORT: 'abc', TASK_LEASE_MS: '1', PROBE_LIMIT: '11', PROBE_OPTIONAL: 'x' });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigValidationError);
    expect((caught as ConfigValidationError).problems).toEqual([
      expect.stringMatching(/^PORT must be an integer/),
      expect.stringMatching(/^TASK_LEASE_MS must be an integer/),
      'PROBE_LIMIT must be an integer between 0 and 10',
      'PROBE_OPTIONAL must be at least 3 characters',
    ]);
    const prod = { NODE_ENV: 'production', HOST: '127.0.0.1', DATABASE_URL: 'postgres://db/x' };
    expect(() =>
      loadConfig({ ...prod, METRICS_PUBLIC: 'true', MCP_RESOURCE_URL: 'https://m/mcp', PROBE_LIMIT: '6' }),
    ).toThrow(/PROBE_LIMIT must be at most 5 in production/);
  });

  it('refuses a validated property that is not declared with @Env (it would never be read)', () => {
    class Undeclared {
      @IntEnv(0, 1)
      FORGOTTEN = 0;
    }
    expect(() => envKeysOf(Undeclared)).toThrow(/Undeclared: FORGOTTEN validated but not declared with @Env/);
  });

  it('gives every registered variable a description', () => {
    for (const { cls } of configSections()) {
      for (const v of envVariablesOf(cls)) expect([v.name, v.description.length > 0]).toEqual([v.name, true]);
    }
  });

  it('keeps docs/configuration.md in step with the classes (npm run docs:config)', () => {
    // The probe section above is registered in this file only: render without it.
    const committed = readFileSync(join(process.cwd(), 'docs', 'configuration.md'), 'utf8');
    expect(committed).toContain('| `TASK_LEASE_MS` | integer, 1000 to 3600000 | `30000` |');
    expect(committed).not.toContain('PROBE_LIMIT');
  });
});
