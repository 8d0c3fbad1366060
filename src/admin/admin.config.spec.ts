import { ConfigValidationError, loadConfig } from '../app.config.js';
import { PrincipalsConfig } from '../principals/principals.config.js';
import { AdminConfig, adminConsoleState } from './admin.config.js';

function stateOf(env: Record<string, string>) {
  const config = loadConfig(env);
  return adminConsoleState(config.get(AdminConfig), config.get(PrincipalsConfig));
}

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigValidationError) return err.problems;
    throw err;
  }
  return [];
}

const PROXY = { AUTH_PROVIDERS: 'proxy', AUTH_PROXY_SECRET: 'proxy-secret-0123456789' };
const PRODUCTION = {
  ...PROXY,
  NODE_ENV: 'production',
  HOST: '127.0.0.1',
  DATABASE_URL: 'postgres://mcp@db.internal/mcp',
  MCP_RESOURCE_URL: 'https://mcp.example.com/mcp',
  METRICS_TOKEN: 'scrape-token-0123456789',
};

describe('ADMIN_CONSOLE', () => {
  it('auto: on with an auth provider and an admin scope or group, off otherwise', () => {
    expect(stateOf({ ...PROXY, ADMIN_GROUPS: 'ops' }).enabled).toBe(true);
    expect(stateOf({ AUTH_PROVIDERS: 'apikey', ADMIN_SCOPE: 'mcp:admin' }).enabled).toBe(true);
    expect(stateOf(PROXY)).toEqual({ enabled: false, reason: expect.stringMatching(/neither ADMIN_SCOPE/) });
    // Without providers nobody can be an admin, whatever is named.
    expect(stateOf({ ADMIN_SCOPE: 'mcp:admin' })).toEqual({
      enabled: false,
      reason: expect.stringMatching(/AUTH_PROVIDERS is empty/),
    });
    expect(stateOf({ ...PROXY, ADMIN_GROUPS: 'ops', ADMIN_CONSOLE: 'off' }).enabled).toBe(false);
  });

  it('on without a credential: refused in production, allowed (and off) elsewhere', () => {
    expect(problemsOf({ ...PRODUCTION, ADMIN_CONSOLE: 'on' })).toEqual([
      expect.stringMatching(/^ADMIN_CONSOLE=on needs an admin credential when NODE_ENV=production/),
    ]);
    expect(problemsOf({ ...PRODUCTION, ADMIN_CONSOLE: 'on', ADMIN_GROUPS: 'ops' })).toEqual([]);
    expect(problemsOf({ ...PRODUCTION, ADMIN_CONSOLE: 'auto' })).toEqual([]);
    expect(problemsOf({ ...PROXY, ADMIN_CONSOLE: 'on' })).toEqual([]);
    expect(stateOf({ ...PROXY, ADMIN_CONSOLE: 'on' }).enabled).toBe(false);
  });

  it('validates its values', () => {
    expect(problemsOf({ ADMIN_CONSOLE: 'yes' })).toEqual([
      expect.stringMatching(/^ADMIN_CONSOLE must be one of/),
    ]);
    expect(problemsOf({ ADMIN_SCOPE: 'two scopes' })).toEqual([
      expect.stringMatching(/^ADMIN_SCOPE must be one/),
    ]);
    expect(problemsOf({ ADMIN_CSRF_SECRET: 'short' })).toEqual([
      expect.stringMatching(/^ADMIN_CSRF_SECRET must be at least 32/),
    ]);
  });
});
