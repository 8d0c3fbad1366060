import type { INestApplication } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../app.config.js';
import { BusConfig } from './bus.config.js';
import { createTestApp } from '../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
import { PgBusService } from './pg-bus.service.js';

/**
 * DATABASE_LISTEN_URL: the LISTEN connection goes to its own URL (past a transaction-mode pooler in
 * production). The test tells the two connections apart by their login role: the pool logs in as the test
 * server's user, the listener as a role created here.
 */
describe('PgBusService with DATABASE_LISTEN_URL', () => {
  let db: TestDatabase;
  let app: INestApplication | undefined;
  const role = `t_listen_${randomBytes(4).toString('hex')}`;
  // A real password: the embedded server (a fresh machine's test database) authenticates with SCRAM, which
  // refuses an empty one; a trust-auth server ignores it.
  const password = randomBytes(12).toString('hex');

  beforeAll(async () => {
    db = await createTestDatabase('listen_url');
    await withClient(db.url, (c) => c.query(`CREATE ROLE "${role}" LOGIN PASSWORD '${password}'`));
  });
  afterAll(async () => {
    await app?.close();
    await db.drop();
    await withClient(db.url.replace(/\/[^/]*$/, '/postgres'), (c) =>
      c.query(`DROP ROLE IF EXISTS "${role}"`),
    );
  });

  it('holds its LISTEN connection on the listen URL and still hears what the pool publishes', async () => {
    const listenUrl = new URL(db.url);
    listenUrl.username = role;
    listenUrl.password = password;
    app = await createTestApp(db.url, { DATABASE_LISTEN_URL: listenUrl.toString() });
    const bus = app.get(PgBusService);
    expect(bus.isConnected).toBe(true);

    const users = await withClient(db.url, (c) =>
      c.query<{ usename: string; application_name: string }>(
        `SELECT usename, application_name FROM pg_stat_activity
          WHERE datname = $1 AND application_name LIKE 'mcp-task-server%'`,
        [db.name],
      ),
    );
    const listeners = users.rows.filter((r) => r.application_name.startsWith('mcp-task-server-listen:'));
    expect(listeners.map((r) => r.usename)).toEqual([role]);
    // The pool's connections keep DATABASE_URL's user.
    expect(
      users.rows.filter((r) => !r.application_name.startsWith('mcp-task-server-listen:')).length,
    ).toBeGreaterThan(0);
    expect(
      users.rows.every((r) => r.application_name.startsWith('mcp-task-server-listen:') || r.usename !== role),
    ).toBe(true);

    const got: unknown[] = [];
    const off = bus.subscribe('listen_url_chan', (p) => got.push(p.id));
    await bus.listening();
    try {
      await bus.publish('listen_url_chan', { id: 'via-pool' });
      const t0 = Date.now();
      while (got.length === 0 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 20));
      expect(got).toEqual(['via-pool']);
    } finally {
      off();
    }
  });

  it('is validated like DATABASE_URL and optional', () => {
    expect(loadConfig({}).get(BusConfig).DATABASE_LISTEN_URL).toBeUndefined();
    expect(() => loadConfig({ DATABASE_LISTEN_URL: 'mysql://db/x' })).toThrow(
      /DATABASE_LISTEN_URL must be a postgres/,
    );
  });
});
