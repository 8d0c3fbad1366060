import pg from 'pg';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
import { isDatabaseUnavailable, isInfrastructureFault } from './internal-fault.js';

/** The shapes isDatabaseUnavailable relies on, as the real driver produces them against a real server. */
describe('isDatabaseUnavailable against real PostgreSQL errors', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('unavailable');
  });
  afterAll(async () => {
    await db.drop();
  });

  const failure = async (fn: () => Promise<unknown>): Promise<unknown> => {
    try {
      await fn();
    } catch (err) {
      return err;
    }
    throw new Error('expected a failure');
  };

  it('a connection ended by the server (restart, failover) is "unavailable"', async () => {
    const victim = new pg.Client({ connectionString: db.url });
    await victim.connect();
    victim.on('error', () => undefined);
    const { rows } = await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    await withClient(db.url, (c) => c.query('SELECT pg_terminate_backend($1)', [rows[0].pid]));
    const err = await failure(() => victim.query('SELECT 1'));
    await victim.end().catch(() => undefined);
    expect(isDatabaseUnavailable(err)).toBe(true);
  });

  it('a refused connection is "unavailable"', async () => {
    const u = new URL(db.url);
    u.port = '1'; // nothing listens on port 1 of loopback
    const client = new pg.Client({ connectionString: u.toString() });
    const err = await failure(() => client.connect());
    expect(isDatabaseUnavailable(err)).toBe(true);
  });

  it('a failing statement is an infrastructure fault but not "unavailable"', async () => {
    const err = await failure(() => withClient(db.url, (c) => c.query('SELECT * FROM no_such_table')));
    expect(isInfrastructureFault(err)).toBe(true);
    expect(isDatabaseUnavailable(err)).toBe(false);
  });
});
