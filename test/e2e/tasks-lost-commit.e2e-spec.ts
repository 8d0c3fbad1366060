import type { INestApplication } from '@nestjs/common';
import pg from 'pg';
import { AdvisoryLockKey } from '../../src/database/advisory-locks.js';
import { PgProxy } from '../support/pg-proxy.js';
import { LegacyClient, waitFor } from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/**
 * The case over real HTTP: task creations committed as one group whose COMMIT reaches PostgreSQL
 * but whose answer is lost (the proxy cuts the connection right after the server reports the COMMIT).
 * Every caller must still get its task, and every task must run to its end, none left to fail "worker
 * lost" with a caller that never learned its id.
 */
describe('a creation group whose COMMIT answer is lost, over HTTP', () => {
  let db: TestDatabase;
  let proxy: PgProxy;
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    db = await createTestDatabase('lost_commit_e2e');
    proxy = await PgProxy.start(db.url);
    app = await createTestApp(proxy.via(db.url), { MCP_BENCH_TOOLS: 'true', JANITOR_ENABLED: 'false' });
    url = await loopbackUrl(app, '/mcp');
  });
  afterAll(async () => {
    await app?.close();
    await proxy?.close();
    await db?.drop();
  });

  it('every tools/call gets its task handle and every task completes', async () => {
    const client = await LegacyClient.open(url);
    // Hold the creation lock so that the creations queue up and commit as one group once it is free.
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock($1)', [AdvisoryLockKey.TaskCreation]);
      const lost = proxy.loseCommitReply(
        (sql) =>
          sql.includes('task_check_creation_limits') &&
          (sql.match(/pg_notify\('mcp_task_changed'/g) ?? []).length >= 2,
      );
      const calls = Array.from({ length: 8 }, (_, i) =>
        client.call('tools/call', { name: 'echo_task', arguments: { text: `call ${i}` }, task: {} }),
      );
      await new Promise((r) => setTimeout(r, 300));
      await holder.query('COMMIT');
      const answers = await Promise.all(calls);
      await lost;
      for (const a of answers) expect(a).toMatchObject({ result: { task: { status: 'working' } } });
      const ids = answers.map((a) => a.result.task.taskId as string);
      expect(new Set(ids).size).toBe(8);
      for (const taskId of ids) {
        const t = await waitFor(
          () => client.result('tasks/get', { taskId }),
          (x) => x.status !== 'working',
        );
        expect(t.status).toBe('completed');
      }
      const rows = await holder.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM task WHERE status = 'completed' AND id = ANY($1::text[])`,
        [ids],
      );
      expect(rows.rows[0].n).toBe(8);
    } finally {
      await holder.end();
    }
  });
});

/**
 * The other task writes over real HTTP: a tasks/cancel whose COMMIT lands but whose answer is lost must
 * answer the cancelled task, as a heard one does, not a 503 for a cancel that happened.
 */
describe('a tasks/cancel whose COMMIT answer is lost, over HTTP', () => {
  let db: TestDatabase;
  let proxy: PgProxy;
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    db = await createTestDatabase('lost_cancel_e2e');
    proxy = await PgProxy.start(db.url);
    app = await createTestApp(proxy.via(db.url), {
      MCP_CONFORMANCE_FIXTURES: 'true',
      JANITOR_ENABLED: 'false',
    });
    url = await loopbackUrl(app, '/mcp');
  });
  afterAll(async () => {
    await app?.close();
    await proxy?.close();
    await db?.drop();
  });

  it('a tasks/cancel whose COMMIT answer is lost answers the cancelled task, not an outage', async () => {
    const client = await LegacyClient.open(url);
    const task = await client.createTask('slow_compute', { seconds: 30 });
    const lost = proxy.loseCommitReply((sql) => sql.includes(task.taskId) && sql.includes('cancelled'));
    const answer = await client.call('tasks/cancel', { taskId: task.taskId });
    expect(await lost).toContain(task.taskId);
    expect(answer.error).toBeUndefined();
    expect(answer.result).toMatchObject({ taskId: task.taskId, status: 'cancelled' });
    expect(await client.result('tasks/get', { taskId: task.taskId })).toMatchObject({ status: 'cancelled' });
  });
});
