import { setTimeout as sleep } from 'node:timers/promises';
import type { ServerProcess } from '../support/server-process.js';
import { LegacyClient, waitFor } from '../support/tasks-e2e.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { chaosEnv, startInstances, stopAll, TERMINAL } from './support/chaos-kit.js';

const LEASE_MS = 3000;
const GRACE_MS = 8000;
const TASK_S = 6;

/**
 * A shutdown grace longer than the lease: the leaving instance keeps renewing the leases of the runs it waits
 * for, so the other instance's janitor does not fail a task that is still working, and the task completes.
 */
describe('chaos: SIGTERM with a grace longer than the lease', () => {
  let db: TestDatabase;
  let servers: ServerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('chaos_sigterm_lease');
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
    await stopAll(servers, 'sigterm-lease');
    await db.drop();
  });

  it('renews the lease of a run until it ends inside the grace', async () => {
    const [leaving, staying] = servers;
    const urlL = `${leaving.baseUrl}/mcp`;
    const urlS = `${staying.baseUrl}/mcp`;
    const client = await LegacyClient.open(urlL);
    const task = await client.createTask('slow_compute', { seconds: TASK_S, label: 'graceful' });
    await sleep(1000);
    const signalledAt = Date.now();
    leaving.proc.kill('SIGTERM');
    const exitCode = await Promise.race([leaving.exited, sleep(GRACE_MS + 10000, 'timeout', { ref: false })]);
    expect(exitCode).toBe(0);
    const final = await waitFor(
      () => client.at(urlS).result('tasks/get', { taskId: task.taskId }),
      (t) => TERMINAL.has(t.status),
      { timeoutMs: 10000, intervalMs: 200, what: `task ${task.taskId} to end` },
    );
    const exitedAfterMs = Date.now() - signalledAt;
    expect({ status: final.status, message: final.statusMessage }).toEqual({
      status: 'completed',
      message: undefined,
    });
    // It stopped once the run had ended, not at the grace's end.
    expect(exitedAfterMs).toBeLessThan(GRACE_MS + 5000);
  });
});
