import type { INestApplication } from '@nestjs/common';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { createTestApp } from '../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
import { inTransaction } from './sql-transaction.js';

/** The lean transaction the task registry writes through: one pooled connection, NOTIFYs with COMMIT. */
describe('inTransaction (real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let ds: DataSource;
  let listener: pg.Client;
  const heard: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('sql_tx');
    app = await createTestApp(db.url, { JANITOR_ENABLED: 'false' });
    ds = app.get(DataSource);
    await ds.query('CREATE TABLE tx_probe (id int PRIMARY KEY, note text)');
    listener = new pg.Client({ connectionString: db.url });
    await listener.connect();
    listener.on('notification', (n) => heard.push(n.payload ?? ''));
    await listener.query('LISTEN tx_probe');
  });
  afterAll(async () => {
    await listener.end();
    await app.close();
    await db.drop();
  });

  const rows = async () =>
    (await ds.query<{ id: number }[]>('SELECT id FROM tx_probe ORDER BY id')).map((r) => r.id);
  const settle = () => new Promise((r) => setTimeout(r, 150));

  it('commits the statements, the commit-time statements and the NOTIFYs together', async () => {
    await inTransaction(ds, { lockTimeoutMs: 1000 }, async (tx) => {
      await tx.query('INSERT INTO tx_probe VALUES ($1, $2)', [1, 'one']);
      tx.atCommit(`INSERT INTO tx_probe VALUES (2, ${tx.literal("two's")})`);
      tx.notifyOnCommit('tx_probe', 'first');
    });
    await settle();
    expect(await rows()).toEqual([1, 2]);
    expect(heard).toEqual(['first']);
    const [{ note }] = await ds.query<{ note: string }[]>('SELECT note FROM tx_probe WHERE id = 2');
    expect(note).toBe("two's");
  });

  it('a commit-time statement that fails rolls back everything, NOTIFYs included', async () => {
    heard.length = 0;
    await expect(
      inTransaction(ds, { lockTimeoutMs: 1000 }, async (tx) => {
        await tx.query('INSERT INTO tx_probe VALUES (3, null)');
        tx.atCommit('INSERT INTO tx_probe VALUES (1, null)'); // duplicate key
        tx.notifyOnCommit('tx_probe', 'never');
      }),
    ).rejects.toMatchObject({ code: '23505' });
    await settle();
    expect(await rows()).toEqual([1, 2]);
    expect(heard).toEqual([]);
    // The connection went back to the pool outside any transaction.
    const [{ open }] = await ds.query<{ open: boolean }[]>(
      `SELECT count(*) > 0 AS open FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`,
    );
    expect(open).toBe(false);
  });

  it('applies its lock timeout and takes the advisory lock it is given', async () => {
    await withClient(db.url, async (other) => {
      await other.query('BEGIN');
      await other.query('SELECT pg_advisory_xact_lock(4242)');
      const started = Date.now();
      await expect(
        inTransaction(ds, { lockTimeoutMs: 200, advisoryLock: 4242 }, async () => 1),
      ).rejects.toMatchObject({ code: '55P03' });
      expect(Date.now() - started).toBeLessThan(5000);
      await other.query('ROLLBACK');
    });
    await expect(
      inTransaction(ds, { lockTimeoutMs: 200, advisoryLock: 4242 }, async () => 'got it'),
    ).resolves.toBe('got it');
  });

  it('a connection killed mid-transaction rejects that transaction only; the pool goes on', async () => {
    const work = inTransaction(ds, { lockTimeoutMs: 0 }, async (tx) => {
      const [{ pid }] = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await withClient(db.url, (c) => c.query('SELECT pg_terminate_backend($1)', [pid]));
      await tx.query('SELECT pg_sleep(0.1)');
    });
    await expect(work).rejects.toThrow();
    await expect(
      inTransaction(ds, { lockTimeoutMs: 0 }, (tx) => tx.query('SELECT 1 AS one')),
    ).resolves.toEqual([{ one: 1 }]);
  });

  it('sends a first statement with BEGIN, values inlined as literals that survive any text', async () => {
    const statement = {
      name: 'tx_probe_first',
      text: `INSERT INTO tx_probe (id, note) VALUES ($1::int, $2) RETURNING id, note, $3::jsonb AS doc, $4::int AS n`,
    };
    const nasty = "it's a \\ '); DROP TABLE tx_probe; --";
    const got = await inTransaction(ds, { lockTimeoutMs: 1000 }, async (tx) => {
      const [row] = await tx.first(statement, [10, nasty, JSON.stringify({ q: "o'k", b: '\\' }), -5]);
      // Not the first any more: the same statement goes as a prepared one.
      const [again] = await tx.first(statement, [11, null, 'null', 0]);
      return { row, again };
    });
    expect(got.row).toEqual({ id: 10, note: nasty, doc: { q: "o'k", b: '\\' }, n: -5 });
    expect(got.again).toEqual({ id: 11, note: null, doc: null, n: 0 });
    expect(await rows()).toEqual([1, 2, 10, 11]);
  });
});
