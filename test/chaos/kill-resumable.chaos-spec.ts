import { setTimeout as sleep } from 'node:timers/promises';
import type { ServerProcess } from '../support/server-process.js';
import { LegacyClient } from '../support/tasks-e2e.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { chaosEnv, figure, pollUntil, startInstances, stopAll, tail } from './support/chaos-kit.js';
import { DurableTasks } from './support/durable-tasks.js';

const SCENARIO = 'kill -9 of an instance running resumable tasks';
const LEASE_MS = 3000;
const TASKS = 6;
const STEPS = 20;
const STEP_MS = 250;
const POLL_MS = 100;

/** The sum of a counter's series with the given label in a Prometheus text page. */
function counterSum(page: string, name: string, label: string): number {
  let sum = 0;
  for (const line of page.split('\n')) {
    if (line.startsWith(`${name}{`) && line.includes(label)) sum += Number(line.split(' ').pop());
  }
  return sum;
}

/**
 * The instance running six resumable `durable_steps` tasks (20 × 250 ms, half created in each era) is killed
 * with SIGKILL. Nothing is handed over; the survivor's janitor finds the worker lost (lapsed lease or
 * silent instance), re-queues each task as attempt 2, and the survivor claims and finishes it from its
 * checkpoint. Each must complete within two lease periods plus its remaining work (measured: the time from
 * the kill to completion, less that work), and no client may see `failed`.
 */
describe('chaos: kill -9 of an instance running resumable tasks', () => {
  let db: TestDatabase;
  let servers: ServerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('chaos_kill_resumable');
    servers = await startInstances(2, chaosEnv(db.url, { TASK_LEASE_MS: String(LEASE_MS) }));
  });
  afterAll(async () => {
    await stopAll(servers, 'kill-resumable');
    await db.drop();
  });

  it('re-queues the lost tasks and completes them on the survivor within two leases plus their remaining work', async () => {
    const [victim, survivor] = servers;
    const urlV = `${victim.baseUrl}/mcp`;
    const urlS = `${survivor.baseUrl}/mcp`;
    const session = await LegacyClient.open(urlS);

    const tracked = new DurableTasks(session, () => urlS);
    for (let n = 0; n < TASKS; n++) await tracked.create(urlV, n, { steps: STEPS, stepMs: STEP_MS });
    const { tasks } = tracked;
    tracked.startPolling(POLL_MS, 1200);

    // Some steps done and checkpointed, most still to go.
    await sleep(6 * STEP_MS + 300);
    const killedAt = Date.now();
    victim.proc.kill('SIGKILL');
    await victim.exited;

    const bound = 4 * LEASE_MS + STEPS * STEP_MS * 2; // how long we wait; the assertion below is tighter
    await pollUntil(
      async () => tracked.allDone(),
      (done) => done,
      bound,
      200,
    );
    await tracked.stop();

    const results = await tracked.results(urlS);
    const timings = tasks.map((t, i) => {
      const r = results[i];
      const elapsedMs = t.doneAt !== undefined ? t.doneAt - killedAt : NaN;
      const remainingMs = r ? (STEPS - r.resumedFromStep) * STEP_MS : NaN;
      return { elapsedMs, remainingMs, rescueMs: elapsedMs - remainingMs };
    });
    const page = await fetch(`${survivor.baseUrl}/metrics`).then(
      (r) => r.text(),
      () => '',
    );
    const failed = tracked.failed();
    const rescueMs = timings.map((x) => x.rescueMs);

    figure(SCENARIO, 'lease', LEASE_MS, 'ms');
    figure(SCENARIO, 'tasks', `${TASKS} x durable_steps ${STEPS} x ${STEP_MS} ms (half per era)`);
    figure(SCENARIO, 'kill to completion per task', timings.map((x) => x.elapsedMs).join(', '), 'ms');
    figure(SCENARIO, 'remaining work per task', timings.map((x) => x.remainingMs).join(', '), 'ms');
    figure(
      SCENARIO,
      'rescue time (kill to completion less the remaining work), max',
      Math.max(...rescueMs),
      `ms (bound ${2 * LEASE_MS} ms; all: ${rescueMs.join(', ')})`,
    );
    figure(SCENARIO, 'resumed from step', results.map((r) => r?.resumedFromStep).join(', '));
    figure(SCENARIO, 'failed tasks', failed.length);
    figure(
      SCENARIO,
      'rescues counted by the survivor (requeued / failed)',
      `${counterSum(page, 'mcp_task_rescues_total', 'outcome="requeued"')} / ${counterSum(page, 'mcp_task_rescues_total', 'outcome="failed"')}`,
    );

    if (failed.length > 0) {
      throw new Error(
        `failed: ${JSON.stringify(failed.map((t) => ({ id: t.taskId, final: t.final, seen: [...t.statuses] })))}\n${tail(survivor)}`,
      );
    }
    for (const r of results) {
      expect(r).toMatchObject({ completedSteps: STEPS, attempts: 2 });
      expect(r!.resumedFromStep).toBeGreaterThanOrEqual(1);
    }
    // The work left runs at its own pace on a loaded machine: a quarter more, and one poll, of margin on it.
    for (const x of timings) {
      expect(x.elapsedMs).toBeLessThanOrEqual(2 * LEASE_MS + x.remainingMs * 1.25 + POLL_MS * 3);
    }
  });
});
