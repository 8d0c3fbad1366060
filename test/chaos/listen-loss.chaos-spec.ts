import { responseOf } from '../support/mcp-http.js';
import type { ServerProcess } from '../support/server-process.js';
import { LegacyClient, modern, waitFor } from '../support/tasks-e2e.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';
import {
  chaosEnv,
  figure,
  heardWithin,
  SessionFeed,
  startInstances,
  statusesOf,
  stopAll,
  SubscriptionFeed,
  TERMINAL,
  tail,
} from './support/chaos-kit.js';

const SCENARIO = 'LISTEN connection ended';
const TASKS_PER_ERA = 4;

/** The LISTEN connection's application_name of a spawned instance (`mcp-task-server-listen:<instance id>`). */
function listenerName(server: ServerProcess): string {
  const m = /instance ([0-9a-f-]{36}) registered/.exec(server.output());
  if (!m) throw new Error('the server did not log its instance id');
  return `mcp-task-server-listen:${m[1]}`;
}

/** Ends one instance's LISTEN connection (its pool is left alone); returns how many backends were ended. */
async function terminateListener(dbUrl: string, name: string): Promise<number> {
  return withClient(dbUrl, async (c) => {
    const r = await c.query(
      `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = $1`,
      [name],
    );
    return r.rows.filter((x: { ok: boolean }) => x.ok).length;
  });
}

async function listenerUp(dbUrl: string, name: string): Promise<boolean> {
  return withClient(dbUrl, async (c) => {
    const r = await c.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`,
      [name],
    );
    return (r.rows[0].n as number) > 0;
  });
}

/**
 * The LISTEN connection alone is ended by the database (`pg_terminate_backend`, as a failover or an idle
 * killer does) and task states change on the other instance before it is back. The stream and the
 * subscription held on the listening instance must still receive every change, live delivery must resume,
 * and no stream may show an older state after a newer one.
 */
describe('chaos: the LISTEN connection ended alone', () => {
  let db: TestDatabase;
  let servers: ServerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('chaos_listen');
    servers = await startInstances(2, chaosEnv(db.url, { TASK_LEASE_MS: '30000' }));
  });
  afterAll(async () => {
    await stopAll(servers, 'listen-loss');
    await db.drop();
  });

  it('delivers every change committed while it was down, then resumes live delivery', async () => {
    const [holder, changer] = servers;
    const urlH = `${holder.baseUrl}/mcp`;
    const urlC = `${changer.baseUrl}/mcp`;

    const client = await LegacyClient.open(urlH);
    const feed = new SessionFeed(client.sessionId, () => urlH);
    await feed.start();
    const legacyIds: string[] = [];
    for (let i = 0; i < TASKS_PER_ERA; i++) {
      legacyIds.push((await client.at(urlC).createTask('slow_compute', { seconds: 120 })).taskId);
    }
    const modernIds: string[] = [];
    for (let i = 0; i < TASKS_PER_ERA; i++) {
      const r = responseOf(
        await modern(urlC, 'tools/call', { name: 'slow_compute', arguments: { seconds: 120 } }),
      );
      expect(r.result.resultType).toBe('task');
      modernIds.push(r.result.taskId);
    }
    const sub = new SubscriptionFeed(modernIds, () => urlH);
    await sub.start();
    await waitFor(
      async () => sub.acknowledged,
      (n) => n > 0,
      { what: 'the subscription acknowledgement' },
    );
    // The creations are announced before the fault: the stream is live.
    for (const id of legacyIds)
      expect(await heardWithin(feed, id, (s) => s === 'working', 5000)).toBeDefined();

    // Each change is committed right after the listeners were ended, before they can reconnect.
    let terminated = 0;
    let committedWhileDown = 0;
    const cancels = [
      ...legacyIds.map((taskId) => () => client.at(urlC).result('tasks/cancel', { taskId })),
      ...modernIds.map(
        (taskId) => async () => responseOf(await modern(urlC, 'tasks/cancel', { taskId })).result,
      ),
    ];
    // Both instances' listeners: the holder's (it wakes the stream and the subscription) and the changer's
    // (it announces its own changes).
    const listeners = servers.map(listenerName);
    const allUp = async () => (await Promise.all(listeners.map((n) => listenerUp(db.url, n)))).every(Boolean);
    for (const cancel of cancels) {
      for (const n of listeners) terminated += await terminateListener(db.url, n);
      await cancel();
      if (!(await allUp())) committedWhileDown++;
    }

    // One deadline for all of them: whatever has not arrived by then is lost.
    const deadline = Date.now() + 15000;
    const missing = () => ({
      legacy: legacyIds.filter((id) => !statusesOf(feed, id).includes('cancelled')),
      modern: modernIds.filter((id) => !statusesOf(sub, id).includes('cancelled')),
    });
    await waitFor(
      async () => missing(),
      (m) => m.legacy.length + m.modern.length === 0 || Date.now() > deadline,
      { timeoutMs: 20000, intervalMs: 100 },
    );
    const { legacy: missedLegacy, modern: missedModern } = missing();

    // Live delivery after the reconnect: a new task changed on the other instance.
    const reconnected = await waitFor(allUp, (up) => up, {
      timeoutMs: 15000,
      intervalMs: 100,
      what: 'the listeners back',
    });
    const fresh = await client.at(urlC).createTask('slow_compute', { seconds: 0, label: 'after' });
    const liveAfter = await heardWithin(feed, fresh.taskId, (s) => s === 'completed', 10000);

    await feed.stop();
    await sub.stop();
    // Never an older state after a newer one: nothing but terminal statuses after the first terminal one.
    const regressions = [
      ...legacyIds.map((id) => statusesOf(feed, id)),
      ...modernIds.map((id) => statusesOf(sub, id)),
    ].filter((seq) => {
      const first = seq.findIndex((s) => TERMINAL.has(s));
      return first !== -1 && seq.slice(first).some((s) => !TERMINAL.has(s));
    }).length;

    figure(SCENARIO, 'LISTEN connections terminated', terminated);
    figure(
      SCENARIO,
      'changes committed while a listener was down',
      `${committedWhileDown} of ${cancels.length}`,
    );
    figure(SCENARIO, 'notifications lost, 2025-11-25 stream', missedLegacy.length, `of ${legacyIds.length}`);
    figure(
      SCENARIO,
      'notifications lost, 2026-07-28 subscription',
      missedModern.length,
      `of ${modernIds.length}`,
    );
    figure(SCENARIO, 'stream reopened', feed.reopened, 'times');
    figure(SCENARIO, 'subscription reopened', sub.reopened, 'times');
    figure(SCENARIO, 'older state after a newer one', regressions);
    // Each change exactly once: no task heard `cancelled` twice on the stream or the subscription.
    const duplicates =
      legacyIds.filter((id) => statusesOf(feed, id).filter((st) => st === 'cancelled').length > 1).length +
      modernIds.filter((id) => statusesOf(sub, id).filter((st) => st === 'cancelled').length > 1).length;
    figure(SCENARIO, 'changes announced more than once', duplicates);
    figure(SCENARIO, 'live delivery after reconnect', liveAfter ? 'yes' : 'no');

    // The fault happened: both listeners were ended, and changes were committed while one was down.
    expect(terminated).toBeGreaterThanOrEqual(servers.length);
    expect(committedWhileDown).toBeGreaterThan(0);
    expect(reconnected).toBe(true);
    if (missedLegacy.length + missedModern.length > 0) {
      throw new Error(
        `notifications lost: stream ${JSON.stringify(missedLegacy)}, subscription ${JSON.stringify(missedModern)}; ` +
          `holder log:\n${tail(holder)}`,
      );
    }
    expect(regressions).toBe(0);
    expect(duplicates).toBe(0);
    expect(liveAfter).toBeDefined();
  });
});
