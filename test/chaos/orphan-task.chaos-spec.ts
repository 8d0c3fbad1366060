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
  statusesOf,
  stopAll,
  SubscriptionFeed,
  tail,
} from './support/chaos-kit.js';

const SCENARIO = 'kill -9 of the worker';
const LEASE_MS = 3000;

/**
 * The instance running a task is killed with SIGKILL while a second instance serves the client. The task must
 * end `failed` within two lease periods, the client must hear it on its stream (legacy era) or its
 * subscription (2026-07-28), and `tasks/result` must answer on the surviving instance.
 */
describe('chaos: kill -9 of the instance running a task', () => {
  let db: TestDatabase;
  let servers: ServerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('chaos_orphan');
    servers = await startInstances(2, chaosEnv(db.url, { TASK_LEASE_MS: String(LEASE_MS) }));
  });
  afterAll(async () => {
    await stopAll(servers, 'orphan-task');
    await db.drop();
  });

  it('fails the orphaned tasks within two leases and tells both eras’ clients', async () => {
    const [worker, survivor] = servers;
    const urlW = `${worker.baseUrl}/mcp`;
    const urlS = `${survivor.baseUrl}/mcp`;

    // Legacy era: the session's GET stream is held by the survivor, the task runs on the worker.
    const client = await LegacyClient.open(urlS);
    const feed = new SessionFeed(client.sessionId, () => urlS);
    await feed.start();
    const legacyTask = await client.at(urlW).createTask('slow_compute', { seconds: 120, label: 'orphan' });

    // 2026-07-28: escalated on the worker, subscribed on the survivor.
    const escalated = responseOf(
      await modern(urlW, 'tools/call', { name: 'slow_compute', arguments: { seconds: 120 } }),
    ).result;
    expect(escalated.resultType).toBe('task');
    const sub = new SubscriptionFeed([escalated.taskId], () => urlS);
    await sub.start();
    await waitFor(
      async () => sub.acknowledged,
      (n) => n > 0,
      { what: 'the subscription acknowledgement' },
    );
    const legacyBefore = await client.result('tasks/get', { taskId: legacyTask.taskId });
    expect(legacyBefore.status).toBe('working');

    const killedAt = Date.now();
    worker.proc.kill('SIGKILL');
    await worker.exited;

    const bound = 4 * LEASE_MS; // how long we wait; the assertion below is on two leases
    const onStream = await heardWithin(feed, legacyTask.taskId, (s) => s === 'failed', bound);
    const onSub = await heardWithin(sub, escalated.taskId, (s) => s === 'failed', bound);
    await feed.stop();
    await sub.stop();

    const streamMs = onStream ? onStream.at - killedAt : NaN;
    const subMs = onSub ? onSub.at - killedAt : NaN;
    figure(SCENARIO, 'lease', LEASE_MS, 'ms');
    figure(SCENARIO, 'orphan failure time, 2025-11-25 stream', streamMs, 'ms');
    figure(SCENARIO, 'orphan failure time, 2026-07-28 subscription', subMs, 'ms');
    figure(
      SCENARIO,
      'notifications lost',
      (onStream ? 0 : 1) + (onSub ? 0 : 1),
      `(stream heard ${JSON.stringify(statusesOf(feed, legacyTask.taskId))}, subscription heard ${JSON.stringify(statusesOf(sub, escalated.taskId))})`,
    );

    if (!onStream || !onSub) throw new Error(`not told in time; survivor log:\n${tail(survivor)}`);
    expect(streamMs).toBeLessThanOrEqual(2 * LEASE_MS);
    expect(subMs).toBeLessThanOrEqual(2 * LEASE_MS);
    expect(onStream.params.statusMessage).toMatch(/worker lost/);
    expect(onSub.params.error).toEqual(expect.objectContaining({ message: expect.any(String) }));

    // tasks/result answers on the survivor: the JSON-RPC error of a lost worker, at once.
    const result = await client.call('tasks/result', { taskId: legacyTask.taskId });
    expect(result.error).toEqual(expect.objectContaining({ message: expect.stringMatching(/worker lost/) }));
    const detailed = responseOf(await modern(urlS, 'tasks/get', { taskId: escalated.taskId })).result;
    expect(detailed).toMatchObject({ taskId: escalated.taskId, status: 'failed' });
  });
});
