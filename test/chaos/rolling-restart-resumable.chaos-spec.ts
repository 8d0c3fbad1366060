import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../support/local-host.js';
import { startServer, type ServerProcess } from '../support/server-process.js';
import { LegacyClient } from '../support/tasks-e2e.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { chaosEnv, figure, pollUntil, readiness, stopAll, tail } from './support/chaos-kit.js';
import { DurableTasks } from './support/durable-tasks.js';

const SCENARIO = 'rolling restart of three instances with resumable tasks';
const INSTANCES = 3;
const TASKS = 30;
// ~15 s of work each, checkpointed every step.
const STEPS = 30;
const STEP_MS = 500;
const DRAIN_DELAY_MS = 1000;

/**
 * Three instances run 30 resumable `durable_steps` tasks of ~15 s (half created in each era, spread over the
 * instances) while each instance in turn is sent SIGTERM, awaited and started again on its port before the
 * next. Every drain hands its tasks over to the queue; the others (or the restarted instance) claim them
 * and go on from their checkpoints. No task may fail, every one completes all its steps, and clients
 * polling tasks/get on the instances that stay up never see `failed`.
 */
describe('chaos: rolling restart with resumable tasks', () => {
  let db: TestDatabase;
  let env: Record<string, string>;
  const ports: number[] = [];
  const servers: ServerProcess[] = [];
  const retired: ServerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('chaos_rolling_resumable');
    env = chaosEnv(db.url, { SHUTDOWN_DRAIN_DELAY_MS: String(DRAIN_DELAY_MS), SHUTDOWN_GRACE_MS: '10000' });
    for (let i = 0; i < INSTANCES; i++) {
      ports.push(await freePort());
      servers.push(await startServer({ ...env, PORT: String(ports[i]) }));
    }
  });
  afterAll(async () => {
    await stopAll([...retired, ...servers], 'rolling-resumable');
    await db?.drop();
  });

  it('completes every task, none failed, while each instance in turn drains and comes back', async () => {
    const url = (i: number): string => `http://127.0.0.1:${ports[i]}/mcp`;
    let restarting = -1;
    // Any instance that is not the one being restarted.
    let rr = 0;
    const upUrl = (): string => {
      for (let k = 0; k < INSTANCES; k++) {
        const i = (rr++ + k) % INSTANCES;
        if (i !== restarting) return url(i);
      }
      return url(0);
    };
    const session = await LegacyClient.open(url(0));

    const tracked = new DurableTasks(session, upUrl);
    for (let n = 0; n < TASKS; n++) {
      await tracked.create(url(n % INSTANCES), n, { steps: STEPS, stepMs: STEP_MS });
    }
    const { tasks } = tracked;
    const createdAt = Date.now();
    // Bounded by count (about 3 minutes of rounds) and by stop().
    tracked.startPolling(300, 600);

    await sleep(2000);
    const drains: number[] = [];
    const started = Date.now();
    for (let i = 0; i < INSTANCES; i++) {
      const leaving = servers[i];
      restarting = i;
      const signalled = Date.now();
      leaving.proc.kill('SIGTERM');
      const code = await Promise.race([leaving.exited, sleep(30000, 'timeout', { ref: false })]);
      drains.push(Date.now() - signalled);
      if (code !== 0) throw new Error(`instance ${i} exit ${code}:\n${tail(leaving)}`);
      retired.push(leaving);
      servers[i] = await startServer({ ...env, PORT: String(ports[i]) });
      const ready = await pollUntil(
        () => readiness(servers[i]),
        (s) => s === 200,
        15000,
      );
      if (ready !== 200) throw new Error(`instance ${i} not ready again:\n${tail(servers[i])}`);
      restarting = -1;
      await sleep(1000);
    }
    const restartMs = Date.now() - started;

    await pollUntil(
      async () => tracked.allDone(),
      (done) => done,
      90000,
      500,
    );
    const allDoneMs = Date.now() - createdAt;
    await tracked.stop();

    const results = await tracked.results(url(0));
    const failed = tracked.failed();
    const attempts = results.map((r) => r?.attempts ?? 0);
    const handedOver = attempts.filter((a) => a > 1).length;

    figure(SCENARIO, 'instances', INSTANCES);
    figure(SCENARIO, 'tasks', `${TASKS} x durable_steps ${STEPS} x ${STEP_MS} ms (half per era)`);
    figure(SCENARIO, 'drain and exit per instance', drains.join(', '), 'ms');
    figure(SCENARIO, 'rolling restart duration', restartMs, 'ms');
    figure(SCENARIO, 'all tasks ended after creation', allDoneMs, 'ms');
    figure(SCENARIO, 'tasks completed', tasks.filter((t) => t.final?.status === 'completed').length);
    figure(SCENARIO, 'failed tasks', failed.length);
    figure(SCENARIO, 'tasks that ran more than once (handed over)', handedOver);
    figure(SCENARIO, 'most runs of one task', Math.max(...attempts));
    figure(SCENARIO, 'tasks/get polls that got no answer (instance going away)', tracked.pollsFailed);

    if (failed.length > 0) {
      throw new Error(
        `failed: ${JSON.stringify(failed.map((t) => ({ id: t.taskId, final: t.final, seen: [...t.statuses] })))}`,
      );
    }
    for (const r of results) expect(r).toMatchObject({ completedSteps: STEPS });
    // Every instance drained with tasks of its own running: each drain handed some over.
    expect(handedOver).toBeGreaterThanOrEqual(INSTANCES);
  });
});
