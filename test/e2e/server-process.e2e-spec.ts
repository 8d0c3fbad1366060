import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MIGRATIONS } from '../../src/schema.js';
import { runServer, startServer, stopServer } from '../support/server-process.js';
import { createTestDatabase, withClient } from '../support/test-database.js';

async function getJson(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url, { headers });
  return { status: res.status, body: await res.json() };
}

/** pids of postgres processes serving the given data directory. */
function postmastersFor(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmd.includes('postgres') && cmd.includes(dir)) pids.push(Number(entry));
    } catch {
      // process ended while we looked
    }
  }
  return pids;
}

describe('the server process', () => {
  it('refuses a bad configuration, naming every bad variable, before touching any database', async () => {
    const run = runServer({ PORT: 'abc', LOG_LEVEL: 'chatty' });
    const code = await run.exited;
    expect(code).not.toBe(0);
    expect(run.output()).toMatch(/PORT must be an integer/);
    expect(run.output()).toMatch(/LOG_LEVEL must be one of/);
    expect(run.output()).not.toMatch(/embedded PostgreSQL/);
  });

  it('refuses an unsafe production configuration at boot, listing every problem in one message', async () => {
    const run = runServer({
      NODE_ENV: 'production',
      HOST: '0.0.0.0',
      OIDC_ISSUER: 'http://idp.example.test/realms/corp',
      OIDC_JWKS_URI: 'http://idp.example.test/jwks',
      OIDC_JWKS_COOLDOWN_MS: '0',
    });
    expect(await run.exited).toBe(1);
    const out = run.output();
    expect(out).toMatch(/AUTH_PROVIDERS must name at least one of oidc, proxy, apikey/);
    expect(out).toMatch(/DATABASE_URL is required when NODE_ENV=production/);
    expect(out).toMatch(/METRICS_TOKEN is required when NODE_ENV=production/);
    expect(out).toMatch(/MCP_RESOURCE_URL is required when NODE_ENV=production/);
    expect(out).toMatch(/OIDC_ISSUER must be an https URL/);
    expect(out).toMatch(/OIDC_JWKS_URI must be an https URL/);
    expect(out).toMatch(/OIDC_JWKS_COOLDOWN_MS must not be 0/);
    // One message: a single "Invalid configuration" header, nothing started before it.
    expect(out.match(/Invalid configuration/g)).toHaveLength(1);
    expect(out).not.toMatch(/listening on|database: /);
  });

  it('starts two instances at the same moment on one database: both ready, migrations applied once', async () => {
    const db = await createTestDatabase('twin');
    try {
      const [a, b] = await Promise.all([
        startServer({ DATABASE_URL: db.url }),
        startServer({ DATABASE_URL: db.url }),
      ]);
      try {
        expect((await getJson(`${a.baseUrl}/health/ready`)).status).toBe(200);
        expect((await getJson(`${b.baseUrl}/health/ready`)).status).toBe(200);
        const migrations = await withClient(db.url, (c) =>
          c.query('SELECT count(*)::int AS n FROM typeorm_migrations'),
        );
        expect(migrations.rows[0].n).toBe(MIGRATIONS.length);
        const instances = await withClient(db.url, (c) =>
          c.query('SELECT count(*)::int AS n FROM service_instance'),
        );
        expect(instances.rows[0].n).toBe(2);
        const appliedLines = [a.output(), b.output()].filter((o) => /applied \d+ migration/.test(o));
        expect(appliedLines).toHaveLength(1);
        // No AUTH_PROVIDERS in development: loud about running unauthenticated.
        expect(a.output()).toMatch(/AUTH_PROVIDERS is empty: authentication is OFF/);
      } finally {
        await Promise.all([stopServer(a), stopServer(b)]);
      }
    } finally {
      await db.drop();
    }
  });

  it('logs JSON lines with the correlation id in production and stops cleanly on SIGTERM', async () => {
    const db = await createTestDatabase('json');
    try {
      const s = await startServer({
        DATABASE_URL: db.url,
        NODE_ENV: 'production',
        LOG_LEVEL: 'debug',
        AUTH_PROVIDERS: 'apikey',
        METRICS_TOKEN: 'metrics-token-for-the-json-test',
        MCP_RESOURCE_URL: 'https://mcp.example.test/mcp',
      });
      const res = await fetch(`${s.baseUrl}/health/live`, { headers: { 'x-request-id': 'trace-me-1' } });
      expect(res.headers.get('x-request-id')).toBe('trace-me-1');
      await res.text();
      expect(await stopServer(s, 'SIGTERM')).toBe(0);
      const lines = s.output().trim().split('\n');
      const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(
        parsed.some((l) => l.request_id === 'trace-me-1' && String(l.msg).includes('/health/live')),
      ).toBe(true);
      expect(s.output()).not.toContain(new URL(db.url).password || 'no-password-in-url');
      const stopped = await withClient(db.url, (c) => c.query('SELECT stopped_at FROM service_instance'));
      expect(stopped.rows[0].stopped_at).not.toBeNull();
    } finally {
      await db.drop();
    }
  });

  describe('on the embedded PostgreSQL (no DATABASE_URL)', () => {
    let parent: string;
    beforeAll(() => {
      parent = mkdtempSync(join(tmpdir(), 'mcp-embedded-'));
      chmodSync(parent, 0o755);
    });
    afterAll(() => {
      for (const pid of postmastersFor(parent)) process.kill(pid, 'SIGKILL');
      rmSync(parent, { recursive: true, force: true });
    });

    it('starts, survives kill -9 on the same data, and stops its database on SIGTERM', async () => {
      const dataDir = join(parent, 'data');
      const env = { DATA_DIR: dataDir };
      const first = await startServer(env, 60000);
      expect(first.output()).toMatch(/database: embedded PostgreSQL/);
      expect((await getJson(`${first.baseUrl}/health/ready`)).status).toBe(200);

      first.proc.kill('SIGKILL');
      await first.exited;
      expect(postmastersFor(dataDir).length).toBeGreaterThan(0); // the orphan the next start must deal with

      const second = await startServer(env, 60000);
      try {
        expect(second.output()).toMatch(/stopping orphaned postmaster/);
        expect((await getJson(`${second.baseUrl}/health/ready`)).status).toBe(200);
        const port = /started on 127\.0\.0\.1:(\d+)/.exec(second.output())![1];
        const { password } = JSON.parse(readFileSync(join(dataDir, 'embedded-pg.json'), 'utf8'));
        const url = `postgres://postgres:${password}@127.0.0.1:${port}/mcp`;
        const rows = await withClient(url, (c) => c.query('SELECT count(*)::int AS n FROM service_instance'));
        expect(rows.rows[0].n).toBe(2); // the first run's row survived: same data
      } finally {
        expect(await stopServer(second, 'SIGTERM')).toBe(0);
      }
      expect(postmastersFor(dataDir)).toEqual([]);
      expect(existsSync(join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
    });
  });
});
