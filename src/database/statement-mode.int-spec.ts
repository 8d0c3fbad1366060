import { DataSource } from 'typeorm';
import { isDatabaseUnavailable } from '../common/internal-fault.js';
import { createTestDatabase, type TestDatabase } from '../testing/test-database.js';
import { startPgBouncer, type PgBouncer } from '../../test/support/pgbouncer.js';
import { runPrepared, type PreparedStatement } from './prepared-query.js';
import { inTransaction } from './sql-transaction.js';
import {
  configureStatementMode,
  initStatementMode,
  poolOf,
  statementMode,
  type StatementMode,
} from './statement-mode.js';
import { buildDataSourceOptions } from './typeorm-options.js';
import { SCHEMA } from '../schema.js';

const PLUS_ONE: PreparedStatement = { name: 'mcp_test_plus_one', text: 'SELECT $1::int + 1 AS n' };
const TIMES_TWO: PreparedStatement = { name: 'mcp_test_times_two', text: 'SELECT $1::int * 2 AS n' };

/** 50 clients at once, each a pooled read and a transaction with two prepared statements; the errors. */
async function burst(ds: DataSource): Promise<unknown[]> {
  const errors: unknown[] = [];
  await Promise.all(
    Array.from({ length: 50 }, async (_, i) => {
      try {
        const [a] = await runPrepared<{ n: number }>(ds, PLUS_ONE, [i]);
        const b = await inTransaction(ds, { lockTimeoutMs: 1000 }, async (tx) => {
          await tx.query('SELECT 1');
          const [x] = await tx.prepared<{ n: number }>(PLUS_ONE, [i]);
          const [y] = await tx.prepared<{ n: number }>(TIMES_TWO, [x.n]);
          return y.n;
        });
        expect([a.n, b]).toEqual([i + 1, (i + 1) * 2]);
      } catch (err) {
        errors.push(err);
      }
    }),
  );
  return errors;
}

/**
 * Named prepared statements against a real PgBouncer in transaction mode without prepared statement
 * tracking (Debian 12's 1.18 cannot track them at all), and straight against PostgreSQL.
 */
describe('prepared statement mode', () => {
  let db: TestDatabase;
  let bouncer: PgBouncer;
  const sources: DataSource[] = [];
  const logs: string[] = [];

  async function open(url: string, poolMax = 10): Promise<DataSource> {
    const ds = new DataSource(buildDataSourceOptions({ url, poolMax, schema: SCHEMA }));
    await ds.initialize();
    sources.push(ds);
    return ds;
  }

  beforeAll(async () => {
    db = await createTestDatabase('stmt_mode');
    bouncer = await startPgBouncer(db.url, { poolMode: 'transaction', poolSize: 4 });
  });
  afterAll(async () => {
    await Promise.all(sources.map((s) => s.destroy().catch(() => undefined)));
    await bouncer?.stop();
    await db?.drop();
  });
  beforeEach(() => logs.splice(0));

  it('keeps named statements on a direct connection', async () => {
    const ds = await open(db.url);
    const mode: StatementMode = await initStatementMode(poolOf(ds), 'auto', (m) => logs.push(m));
    expect(mode).toBe('named');
    expect(logs).toEqual([expect.stringMatching(/^prepared statements: named \(auto: /)]);
    expect(await burst(ds)).toEqual([]);
  });

  it('finds out at boot that a transaction pooler loses them, and runs 50 clients without an error', async () => {
    const ds = await open(bouncer.url);
    expect(await initStatementMode(poolOf(ds), 'auto', (m) => logs.push(m))).toBe('unnamed');
    expect(logs).toEqual([
      'prepared statements: unnamed (auto: a transaction pooler that does not keep prepared statements)',
    ]);
    expect(await burst(ds)).toEqual([]);
  });

  it('switches at the first lost statement and retries it when the boot probe did not run', async () => {
    const ds = await open(bouncer.url);
    configureStatementMode(poolOf(ds), 'auto', (m) => logs.push(m));
    expect(statementMode(poolOf(ds))).toBe('named');
    expect(await burst(ds)).toEqual([]);
    expect(statementMode(poolOf(ds))).toBe('unnamed');
    expect(logs).toEqual([expect.stringMatching(/^prepared statements: unnamed from now on/)]);
  });

  it('does not probe with a pool of one (it would wait for itself) and still switches at run time', async () => {
    const ds = await open(bouncer.url, 1);
    expect(await initStatementMode(poolOf(ds), 'auto', (m) => logs.push(m))).toBe('named');
    expect(logs).toEqual(['prepared statements: named (auto: not probed with a pool of one)']);
    // One connection, so the mismatch needs another client of the pooler to move its server connection.
    const other = await open(bouncer.url, 4);
    configureStatementMode(poolOf(other), 'unnamed', () => undefined);
    const errors = (await Promise.all([burst(ds), burst(other)])).flat();
    expect(errors).toEqual([]);
  });

  it('forced named behind the pooler fails, as a fault a retry can cure', async () => {
    const ds = await open(bouncer.url);
    expect(await initStatementMode(poolOf(ds), 'named', (m) => logs.push(m))).toBe('named');
    expect(logs).toEqual(['prepared statements: named (DB_PREPARED_STATEMENTS=named)']);
    const errors = await burst(ds);
    expect(errors.length).toBeGreaterThan(0);
    for (const err of errors) {
      expect((err as { code?: string }).code).toMatch(/^(26000|42P05)$/);
      expect(isDatabaseUnavailable(err)).toBe(true);
    }
    expect(statementMode(poolOf(ds))).toBe('named');
  });

  it('forced unnamed never names a statement', async () => {
    const ds = await open(bouncer.url);
    expect(await initStatementMode(poolOf(ds), 'unnamed', (m) => logs.push(m))).toBe('unnamed');
    expect(await burst(ds)).toEqual([]);
    expect(logs).toEqual(['prepared statements: unnamed (DB_PREPARED_STATEMENTS=unnamed)']);
  });
});
