import { setTimeout as sleep } from 'node:timers/promises';
import type { ServerProcess } from '../support/server-process.js';
import { LegacyClient, waitFor } from '../support/tasks-e2e.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { chaosEnv, startInstances, stopAll, tail, TERMINAL } from './support/chaos-kit.js';

const LEASE_MS = 3000;
/** Several leases long: a run inside it must keep its lease, or the other instance's janitor takes it. */
const GRACE_MS = 12000;
const TASK_S = 7;

/**
 * A plain (not resumable) task keeps running through a shutdown grace longer than its lease: the leaving
 * instance renews its lease until the run ends, so the other instance's janitor (sweeping every second)
 * never fails it "worker lost", and it completes with its own result.
 */
describe('chaos: SIGTERM with a shutdown grace longer than the task lease', () => {
  let db: TestDatabase;
  let servers: ServerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('chaos_long_grace');
    servers = await startInstances(
      2,
      chaosEnv(db.url, {
        TASK_LEASE_MS: String(LEASE_MS),
        SHUTDOWN_GRACE_MS: String(GRACE_MS),
        SHUTDOWN_DRAIN_DELAY_MS: '0',
      }),
    );
  });
  afterAll(async () => {
    await stopAll(servers, 'long-grace');
    await db.drop();
  });

  it('completes a run that ends inside the grace, several leases after the signal', async () => {
    const [leaving, staying] = servers;
    const client = await LegacyClient.open(`${leaving.baseUrl}/mcp`);
    const task = await client.createTask('slow_compute', { seconds: TASK_S, label: 'long-grace' });
    await sleep(1000);
    const signalledAt = Date.now();
    leaving.proc.kill('SIGTERM');

    const final = await waitFor(
      () => client.at(`${staying.baseUrl}/mcp`).result('tasks/get', { taskId: task.taskId }),
      (t) => TERMINAL.has(t.status),
      { timeoutMs: GRACE_MS + 10000, intervalMs: 200, what: 'the task to end' },
    );
    const endedMs = Date.now() - signalledAt;
    const exitCode = await Promise.race([leaving.exited, sleep(GRACE_MS + 10000, 'timeout', { ref: false })]);
    const result = await client.at(`${staying.baseUrl}/mcp`).call('tasks/result', { taskId: task.taskId });

    const seen = {
      status: final.status,
      statusMessage: final.statusMessage,
      isError: result.result?.isError === true,
      text: JSON.stringify(result.result?.content ?? []),
      exitCode,
    };
    if (seen.status !== 'completed') console.log(`ended ${endedMs} ms after SIGTERM\n${tail(leaving)}`);
    expect(seen).toEqual({
      status: 'completed',
      statusMessage: undefined,
      isError: false,
      text: expect.stringContaining('long-grace'),
      exitCode: 0,
    });
    // It ran to its end (about TASK_S - 1 s after the signal), well past one lease.
    expect(endedMs).toBeGreaterThan(LEASE_MS);
  });
});
