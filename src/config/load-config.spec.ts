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

  it('reads MCP_CONFORMANCE_FIXTURES as a boolean, off by default', () => {
    expect(loadConfig({}).MCP_CONFORMANCE_FIXTURES).toBe(false);
    expect(loadConfig({ MCP_CONFORMANCE_FIXTURES: 'true' }).MCP_CONFORMANCE_FIXTURES).toBe(true);
    expect(() => loadConfig({ MCP_CONFORMANCE_FIXTURES: 'sometimes' })).toThrow(
      /MCP_CONFORMANCE_FIXTURES must be true or false/,
    );
  });
});
