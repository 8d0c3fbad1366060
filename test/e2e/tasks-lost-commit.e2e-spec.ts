import type { INestApplication } from '@nestjs/common';
import pg from 'pg';
import { AdvisoryLockKey } from '../../src/database/advisory-locks.js';
import { PgProxy } from '../support/pg-proxy.js';
import { responseOf } from '../support/mcp-http.js';
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

/**
 * A claim, and a keyed creation, whose COMMIT lands but whose answer is lost while PostgreSQL then stays out
 * of reach for a moment, over real HTTP with the janitor on and a short lease: the tasks they leased to the
 * worker must run to completion once PostgreSQL is back, not lapse and fail "worker lost", and a repeat with
 * the Idempotency-Key must find a task that runs.
 */
describe('a claim or keyed creation whose COMMIT answer is lost during an outage, over HTTP', () => {
  let db: TestDatabase;
  let proxy: PgProxy;
  /** Takes the calls that are queued (INSTANCE_ROLE=web), straight on the database; its janitor runs. */
  let web: INestApplication;
  /** Runs work, through the proxy. */
  let worker: INestApplication;
  let webUrl: string;
  let workerUrl: string;

  beforeAll(async () => {
    db = await createTestDatabase('lost_lease_e2e');
    proxy = await PgProxy.start(db.url);
    const env = {
      MCP_BENCH_TOOLS: 'true',
      TASK_LEASE_MS: '4000',
      JANITOR_INTERVAL_MS: '1000',
      TASK_EXPIRED_GRACE_MS: '0',
    };
    web = await createTestApp(db.url, { ...env, INSTANCE_ROLE: 'web' });
    worker = await createTestApp(proxy.via(db.url), env);
    webUrl = await loopbackUrl(web, '/mcp');
    workerUrl = await loopbackUrl(worker, '/mcp');
  });
  afterAll(async () => {
    proxy?.refuse(undefined);
    await Promise.all([web?.close(), worker?.close()]);
    await proxy?.close();
    await db?.drop();
  });

  /** Once the next COMMIT whose text `match`es has lost its answer, PostgreSQL is out of reach for 1 s. */
  const loseCommitThenOutage = (match: (sql: string) => boolean): Promise<void> =>
    proxy.loseCommitReply(match).then(async () => {
      proxy.refuse(() => true);
      proxy.cut(() => true);
      await new Promise((r) => setTimeout(r, 1000));
      proxy.refuse(undefined);
    });

  const settled = (client: LegacyClient, taskId: string) =>
    waitFor(
      () => client.result('tasks/get', { taskId }),
      (t) => t.status !== 'working',
      { timeoutMs: 20000, intervalMs: 200, what: `task ${taskId} to finish` },
    );

  const attemptsOf = async (taskId: string) => {
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      const r = await holder.query(`SELECT attempt, failed_attempts FROM task WHERE id = $1`, [taskId]);
      return r.rows[0] as { attempt: number; failed_attempts: number };
    } finally {
      await holder.end();
    }
  };

  it('a queued task whose claim was committed unheard runs to completion on the worker', async () => {
    const client = await LegacyClient.open(webUrl);
    // The worker's first COMMIT naming this session is its claim of the task (its change notification).
    const back = loseCommitThenOutage((sql) => sql.includes(client.sessionId));
    const task = await client.createTask('echo_task', { text: 'claimed unheard' });
    await back;
    const t = await settled(client, task.taskId);
    expect(t).toMatchObject({ status: 'completed' });
    expect(await attemptsOf(task.taskId)).toEqual({ attempt: 1, failed_attempts: 0 });
  });

  it('a keyed creation committed unheard runs, and a repeat with the key sees it complete', async () => {
    const key = `lost-commit-${Date.now()}`;
    const client = await LegacyClient.open(workerUrl, {}, { 'idempotency-key': key });
    const back = loseCommitThenOutage((sql) => sql.includes(key));
    const params = { name: 'echo_task', arguments: { text: 'keyed unheard' }, task: {} };
    const first = await client.send('tools/call', params);
    // The creation's outcome could not be learned: an outage answer, not a task handle.
    expect(responseOf(first)?.result?.task).toBeUndefined();
    await back;
    const repeat = await waitFor(
      () => client.send('tools/call', params),
      (a) => responseOf(a)?.result?.task !== undefined,
      { timeoutMs: 10000, intervalMs: 200, what: 'the repeat to answer a task' },
    );
    const taskId = responseOf(repeat).result.task.taskId as string;
    const t = await settled(client, taskId);
    expect(t).toMatchObject({ status: 'completed' });
    expect(await attemptsOf(taskId)).toEqual({ attempt: 1, failed_attempts: 0 });
    // Still the one task: the key named it all along.
    const again = responseOf(await client.send('tools/call', params));
    expect(again.result.task).toMatchObject({ taskId, status: 'completed' });
  });
});
