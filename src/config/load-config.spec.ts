import { ConfigValidationError, loadConfig } from './load-config.js';

describe('loadConfig', () => {
  it('applies the documented defaults to an empty environment', () => {
    const c = loadConfig({});
    expect(c.PORT).toBe(3000);
    expect(c.HOST).toBe('127.0.0.1');
    expect(c.DATA_DIR).toBe('./.data');
    expect(c.DB_MIGRATIONS_RUN).toBe(true);
    expect(c.HTTP_BODY_LIMIT).toBe('4mb');
    expect(c.bodyLimitBytes).toBe(4 * 1024 * 1024);
    expect(c.SHUTDOWN_GRACE_MS).toBe(10000);
    expect(c.DATABASE_URL).toBeUndefined();
    expect(c.CORS_ORIGINS).toEqual([]);
  });

  it('converts numbers, booleans, sizes and lists', () => {
    const c = loadConfig({
      PORT: '8080',
      DB_MIGRATIONS_RUN: 'false',
      HTTP_BODY_LIMIT: '512kb',
      CORS_ORIGINS: 'https://a.example, https://b.example',
    });
    expect(c.PORT).toBe(8080);
    expect(c.DB_MIGRATIONS_RUN).toBe(false);
    expect(c.bodyLimitBytes).toBe(512 * 1024);
    expect(c.CORS_ORIGINS).toEqual(['https://a.example', 'https://b.example']);
  });

  it('treats an empty variable as unset', () => {
    expect(loadConfig({ PORT: '', DATABASE_URL: ' ' }).PORT).toBe(3000);
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
      expect(c.AUTH_PROVIDERS).toEqual([]);
      expect(c.OIDC_ALGORITHMS).toContain('RS256');
      expect(c.OIDC_ALGORITHMS.some((a) => a.startsWith('HS') || a === 'none')).toBe(false);
      expect(c.OIDC_CLOCK_SKEW_S).toBe(60);
      expect(c.AUTH_PROXY_USER_HEADER).toBe('x-forwarded-user');
      expect(c.METRICS_TOKEN).toBeUndefined();
    });

    it('takes the audience from MCP_RESOURCE_URL unless OIDC_AUDIENCE is set', () => {
      expect(loadConfig(oidc).oidcAudiences).toEqual(['https://mcp.example.com/mcp']);
      expect(loadConfig({ ...oidc, OIDC_AUDIENCE: 'api://mcp, mcp' }).oidcAudiences).toEqual([
        'api://mcp',
        'mcp',
      ]);
    });

    it('refuses unknown providers, HMAC and none algorithms, and bad header names', () => {
      expect(() => loadConfig({ AUTH_PROVIDERS: 'oidc,ldap' })).toThrow(
        /AUTH_PROVIDERS must be a comma list/,
      );
      expect(() => loadConfig({ OIDC_ALGORITHMS: 'RS256,HS256' })).toThrow(/OIDC_ALGORITHMS/);
      expect(() => loadConfig({ OIDC_ALGORITHMS: 'none' })).toThrow(/OIDC_ALGORITHMS/);
      expect(() => loadConfig({ AUTH_PROXY_USER_HEADER: 'x user' })).toThrow(/AUTH_PROXY_USER_HEADER/);
      expect(loadConfig({ AUTH_PROXY_USER_HEADER: 'X-Auth-Request-User' }).AUTH_PROXY_USER_HEADER).toBe(
        'x-auth-request-user',
      );
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
      expect(loadConfig(oidc).AUTH_PROVIDERS).toEqual(['oidc']);
    });

    it('needs a proxy secret of at least 16 characters for proxy', () => {
      expect(() => loadConfig({ AUTH_PROVIDERS: 'proxy' })).toThrow(
        /AUTH_PROXY_SECRET is required when AUTH_PROVIDERS includes proxy/,
      );
      expect(() => loadConfig({ AUTH_PROVIDERS: 'proxy', AUTH_PROXY_SECRET: 'short' })).toThrow(
        /AUTH_PROXY_SECRET must be at least 16 characters/,
      );
      expect(
        loadConfig({ AUTH_PROVIDERS: 'proxy', AUTH_PROXY_SECRET: 'x'.repeat(16) }).AUTH_PROVIDERS,
      ).toEqual(['proxy']);
    });

    it('refuses production without providers', () => {
      expect(() => loadConfig({ NODE_ENV: 'production' })).toThrow(
        /AUTH_PROVIDERS must name at least one of oidc, proxy, apikey when NODE_ENV=production/,
      );
      expect(loadConfig({ NODE_ENV: 'production', AUTH_PROVIDERS: 'apikey' }).isProduction).toBe(true);
    });
  });

  it('reads MCP_CONFORMANCE_FIXTURES as a boolean, off by default', () => {
    expect(loadConfig({}).MCP_CONFORMANCE_FIXTURES).toBe(false);
    expect(loadConfig({ MCP_CONFORMANCE_FIXTURES: 'true' }).MCP_CONFORMANCE_FIXTURES).toBe(true);
    expect(() => loadConfig({ MCP_CONFORMANCE_FIXTURES: 'sometimes' })).toThrow(
      /MCP_CONFORMANCE_FIXTURES must be true or false/,
    );
  });
});
