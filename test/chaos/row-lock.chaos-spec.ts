import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { responseOf } from '../support/mcp-http.js';
import type { ServerProcess } from '../support/server-process.js';
import { LegacyClient, modern, waitFor } from '../support/tasks-e2e.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import {
  chaosEnv,
  figure,
  heardWithin,
  SessionFeed,
  startInstances,
  stopAll,
  SubscriptionFeed,
  tail,
} from './support/chaos-kit.js';

const SCENARIO = 'row lock during the final write';
const LOCK_TIMEOUT_MS = 500;
const LEASE_MS = 8000;
/** The work ends while the lock is held; the lock outlives the lock timeout several times over. */
const WORK_S = 1;
const HOLD_MS = 3000;

/**
 * Another transaction (an operator's psql, a long report) holds the task rows FOR UPDATE past
 * TASK_LOCK_TIMEOUT_MS exactly when the workers write their results. The writes time out; the results must
 * still be written once the lock is gone (within the lease), and announced.
 */
describe('chaos: a row lock held past TASK_LOCK_TIMEOUT_MS while the worker writes its result', () => {
  let db: TestDatabase;
  let servers: ServerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('chaos_lock');
    servers = await startInstances(
      1,
      chaosEnv(db.url, { TASK_LOCK_TIMEOUT_MS: String(LOCK_TIMEOUT_MS), TASK_LEASE_MS: String(LEASE_MS) }),
    );
  });
  afterAll(async () => {
    await stopAll(servers, 'row-lock');
    await db.drop();
  });

  it('writes both results after the lock is released, and announces them', async () => {
    const [server] = servers;
    const url = `${server.baseUrl}/mcp`;
    const client = await LegacyClient.open(url);
    const feed = new SessionFeed(client.sessionId, () => url);
    await feed.start();

    const legacyTask = await client.createTask('slow_compute', { seconds: WORK_S, label: 'locked' });
    const escalated = responseOf(
      await modern(url, 'tools/call', { name: 'slow_compute', arguments: { seconds: WORK_S, label: 'm' } }),
    ).result;
    expect(escalated.resultType).toBe('task');
    const sub = new SubscriptionFeed([escalated.taskId], () => url);
    await sub.start();

    const locker = new pg.Client({ connectionString: db.url, application_name: 'chaos-row-locker' });
    await locker.connect();
    let statusAtRelease: string[] = [];
    try {
      await locker.query('BEGIN');
      const locked = await locker.query('SELECT id FROM task WHERE id = ANY($1) FOR UPDATE', [
        [legacyTask.taskId, escalated.taskId],
      ]);
      expect(locked.rowCount).toBe(2);
      await sleep(HOLD_MS);
      // Under our lock nobody could have written: both are still working although their work is long done.
      statusAtRelease = (
        await locker.query('SELECT status FROM task WHERE id = ANY($1)', [
          [legacyTask.taskId, escalated.taskId],
        ])
      ).rows.map((r: { status: string }) => r.status);
      await locker.query('COMMIT');
    } finally {
      await locker.end();
    }
    const releasedAt = Date.now();

    const legacyDone = await waitFor(
      () => client.result('tasks/get', { taskId: legacyTask.taskId }),
      (t) => t.status !== 'working',
      { timeoutMs: LEASE_MS + 5000, intervalMs: 100, what: 'the locked legacy task to finish' },
    ).catch(() => undefined);
    const modernDone = await waitFor(
      async () => responseOf(await modern(url, 'tasks/get', { taskId: escalated.taskId })).result,
      (t) => t.status !== 'working',
      { timeoutMs: LEASE_MS + 5000, intervalMs: 100, what: 'the locked modern task to finish' },
    ).catch(() => undefined);
    const writtenMs = Date.now() - releasedAt;
    const heardLegacy = await heardWithin(feed, legacyTask.taskId, (s) => s === 'completed', 3000);
    const heardModern = await heardWithin(sub, escalated.taskId, (s) => s === 'completed', 3000);
    await feed.stop();
    await sub.stop();

    const lost = (legacyDone?.status === 'completed' ? 0 : 1) + (modernDone?.status === 'completed' ? 0 : 1);
    figure(SCENARIO, 'lock timeout', LOCK_TIMEOUT_MS, 'ms');
    figure(SCENARIO, 'lock held', HOLD_MS, 'ms');
    figure(SCENARIO, 'statuses at release', statusAtRelease.join(','));
    figure(SCENARIO, 'results written after release within', writtenMs, 'ms');
    figure(
      SCENARIO,
      'results lost',
      lost,
      `(legacy ${legacyDone?.status ?? 'still working'}: ${legacyDone?.statusMessage ?? ''}; modern ${modernDone?.status ?? 'still working'})`,
    );
    figure(SCENARIO, 'notifications lost', (heardLegacy ? 0 : 1) + (heardModern ? 0 : 1));

    expect(statusAtRelease).toEqual(['working', 'working']);
    if (lost > 0) throw new Error(`results lost: ${lost}; server log:\n${tail(server)}`);
    const result = await client.result('tasks/result', { taskId: legacyTask.taskId });
    expect(result.content).toEqual([{ type: 'text', text: `Computed locked after ${WORK_S} s` }]);
    expect(modernDone.result.content).toEqual([{ type: 'text', text: `Computed m after ${WORK_S} s` }]);
    expect(heardLegacy).toBeDefined();
    expect(heardModern).toBeDefined();
  });
});
