import { setTimeout as sleep } from 'node:timers/promises';
import { startServer, type ServerProcess } from '../support/server-process.js';
import { LegacyClient } from '../support/tasks-e2e.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { chaosEnv, figure, pollUntil, stopAll, tail, TERMINAL } from './support/chaos-kit.js';

const SCENARIO = 'SIGTERM during a resumable task, then a restart';
const STEPS = 20;
const STEP_MS = 250;
// Long on purpose: a drain that waited it out before releasing the task would show in the exit time.
const GRACE_MS = 20000;
const DRAIN_DELAY_MS = 1000;

/** Everything a client polling tasks/get saw, with when (a refused connection while no instance is up: 0). */
class TaskPoller {
  readonly seen: { at: number; status: string; statusMessage?: string }[] = [];
  refused = 0;
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(client: () => LegacyClient, taskId: string, everyMs = 100) {
    this.loop = (async () => {
      // Bounded: 10 minutes of polls at most, whatever happens.
      for (let i = 0; i < 6000 && !this.stopped; i++) {
        try {
          const t = await client().result('tasks/get', { taskId });
          this.seen.push({ at: Date.now(), status: t.status, statusMessage: t.statusMessage });
          if (TERMINAL.has(t.status)) return;
        } catch {
          this.refused++;
        }
        await sleep(everyMs);
      }
    })();
  }

  statuses(): string[] {
    return [...new Set(this.seen.map((s) => s.status))];
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}

/**
 * The one instance running a `durable_steps` task (resumable, checkpointing after each step) gets SIGTERM
 * and is started again. The drain hands the task over at once (no wait for SHUTDOWN_GRACE_MS), the next
 * incarnation claims it and goes on from its last checkpoint: the task completes on attempt 2, and the
 * client polling tasks/get throughout never sees `failed`.
 */
describe('chaos: SIGTERM and restart during a resumable task', () => {
  let db: TestDatabase;
  let env: Record<string, string>;
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('chaos_sigterm_resumable');
    env = chaosEnv(db.url, {
      SHUTDOWN_GRACE_MS: String(GRACE_MS),
      SHUTDOWN_DRAIN_DELAY_MS: String(DRAIN_DELAY_MS),
    });
    servers.push(await startServer(env));
  });
  afterAll(async () => {
    await stopAll(servers, 'sigterm-resumable');
    await db.drop();
  });

  it('hands the task over at the drain and finishes it on the next incarnation from its checkpoint', async () => {
    const first = servers[0];
    let url = `${first.baseUrl}/mcp`;
    const opened = await LegacyClient.open(url);
    const client = (): LegacyClient => opened.at(url);
    const created = await client().createTask('durable_steps', { steps: STEPS, stepMs: STEP_MS });
    const poller = new TaskPoller(client, created.taskId);
    // A few steps in (each checkpointed), well before the end.
    await sleep(6 * STEP_MS + 200);

    const signalledAt = Date.now();
    first.proc.kill('SIGTERM');
    const exitCode = await Promise.race([first.exited, sleep(GRACE_MS + 15000, 'timeout', { ref: false })]);
    const exitedMs = Date.now() - signalledAt;
    if (exitCode !== 0) throw new Error(`exit ${exitCode}; log:\n${tail(first)}`);
    const handedOver = poller.seen.find(
      (s) => s.at >= signalledAt && /Handed over/.test(s.statusMessage ?? ''),
    );

    const second = await startServer(env);
    servers.push(second);
    url = `${second.baseUrl}/mcp`;
    const restartedAt = Date.now();
    const final = await pollUntil(
      () => client().result('tasks/get', { taskId: created.taskId }),
      (t) => TERMINAL.has(t.status),
      30000,
    );
    const doneAt = Date.now();
    await poller.stop();
    const result = await client().call('tasks/result', { taskId: created.taskId });
    const out = result.result?.structuredContent;

    figure(SCENARIO, 'steps', `${STEPS} x ${STEP_MS}`, 'ms');
    figure(SCENARIO, 'grace', GRACE_MS, 'ms');
    figure(
      SCENARIO,
      'handed over after the signal',
      handedOver ? handedOver.at - signalledAt : 'never seen',
      'ms',
    );
    figure(SCENARIO, 'old instance exited after the signal', exitedMs, 'ms');
    figure(SCENARIO, 'completed after the restart', doneAt - restartedAt, 'ms');
    figure(SCENARIO, 'statuses the client saw', poller.statuses().join(', '));
    figure(SCENARIO, 'polls refused while no instance was up', poller.refused);
    figure(SCENARIO, 'result', JSON.stringify(out ?? result.error));

    expect(final.status).toBe('completed');
    expect(poller.statuses()).not.toContain('failed');
    expect(out).toEqual({ completedSteps: STEPS, attempts: 2, resumedFromStep: expect.any(Number) });
    expect(out.resumedFromStep).toBeGreaterThanOrEqual(4);
    expect(out.resumedFromStep).toBeLessThan(STEPS);
    // Released at the drain, not after the grace: the old instance was gone long before it ran out.
    expect(exitedMs).toBeLessThan(GRACE_MS / 2);
  });
});
