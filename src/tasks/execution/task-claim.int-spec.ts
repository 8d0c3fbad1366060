import type { INestApplication } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import {
  ControlledExecutor,
  metricValue,
  sleep,
  waitFor,
} from '../../../test/support/controlled-executor.js';
import { legacyTaskInput, newTaskRow } from '../../../test/support/task-registry.js';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import { InstancesService } from '../../instances/instances.service.js';
import { TaskClaimer } from './task-claimer.service.js';
import { TaskCreationRepository } from '../store/task-creation.repository.js';
import { QUEUED_MESSAGE } from '../task-queue.js';
import { TaskQueueRepository, type ClaimedTask } from '../store/task-queue.repository.js';
import { TaskWorkerRepository } from '../store/task-worker.repository.js';
import { TasksService } from '../registry/tasks.service.js';
import { TaskCreationService } from '../execution/task-creation.service.js';

const LIMITS = { maxPerOwner: 1000, maxTotal: 10000, maxRetainedPerOwner: 10000 };
const PRINCIPAL = { id: 'o-claim', provider: 'proxy', subject: 'alice', scopes: ['read'], groups: ['g1'] };

/**
 * The queue every instance claims from (issue 22), on real PostgreSQL: the claim statement under
 * concurrency and its fence, then the claimer of an instance that runs work, bounded by
 * TASK_WORKER_CONCURRENCY and woken by the bus.
 */
describe('task queue claim (real PostgreSQL)', () => {
  let db: TestDatabase;
  /** Two web instances: their claimers never run, so only the test's own claims take rows. */
  let web1: INestApplication;
  let web2: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase('task_claim');
    const env = { JANITOR_ENABLED: 'false', INSTANCE_ROLE: 'web' };
    [web1, web2] = await Promise.all([createTestApp(db.url, env), createTestApp(db.url, env)]);
  });
  afterAll(async () => {
    await Promise.all([web1?.close(), web2?.close()]);
    await db?.drop();
  });

  const queueTasks = async (owner: string, n: number): Promise<string[]> => {
    const creations = web1.get(TaskCreationRepository);
    const me = web1.get(InstancesService).instanceId;
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const t = await creations.insertWithLimits(
        { ...newTaskRow(me, owner), instanceId: null, principal: PRINCIPAL, statusMessage: QUEUED_MESSAGE },
        LIMITS,
      );
      ids.push(t.id);
    }
    return ids;
  };

  it('N parallel claimers over M queued tasks claim each exactly once, oldest first', async () => {
    const ids = await queueTasks('o-many', 60);
    const repos = [web1.get(TaskQueueRepository), web2.get(TaskQueueRepository)];
    const claimers = Array.from({ length: 8 }, (_, i) => ({ instance: randomUUID(), repo: repos[i % 2] }));
    const got = new Map<string, ClaimedTask[]>();
    await Promise.all(
      claimers.map(async (c) => {
        const mine: ClaimedTask[] = [];
        for (;;) {
          const claimed = await c.repo.claim(c.instance, 3, 30000);
          if (claimed.length === 0) break;
          mine.push(...claimed);
        }
        got.set(c.instance, mine);
      }),
    );
    const all = [...got.values()].flat();
    expect(all.map((c) => c.task.id).sort()).toEqual([...ids].sort());
    expect(new Set(all.map((c) => c.task.id)).size).toBe(60);
    // Each claim leased the row to its claimer at the next generation, and cleared the queue fields.
    for (const [instance, mine] of got) {
      for (const c of mine) {
        expect(c.task).toMatchObject({ instanceId: instance, generation: 2, availableAt: null, attempt: 1 });
        expect(c.task.statusMessage).toBeNull();
        expect(c.task.leaseExpiresAt).toBeInstanceOf(Date);
        expect(c.principal).toEqual(PRINCIPAL);
        expect(c.waitedMs).toBeGreaterThanOrEqual(0);
      }
    }
    // More than one claimer took part (SKIP LOCKED lets them run side by side).
    expect([...got.values()].filter((m) => m.length > 0).length).toBeGreaterThan(1);
    const rows = await withClient(db.url, (c) =>
      c.query(`SELECT count(*)::int AS n FROM task WHERE owner_id = 'o-many' AND instance_id IS NULL`),
    );
    expect(rows.rows[0].n).toBe(0);
    expect(await web1.get(TaskQueueRepository).depth()).toMatchObject({ ready: 0, delayed: 0 });
  });

  it('a claim fences out the run that gave the task back, and skips delayed and expired rows', async () => {
    const creations = web1.get(TaskCreationRepository);
    const worker = web1.get(TaskWorkerRepository);
    const queue = web2.get(TaskQueueRepository);
    const a = web1.get(InstancesService).instanceId;
    const b = randomUUID();
    const t = await creations.insertWithLimits(newTaskRow(a, 'o-fence'), LIMITS);
    const oldRun = { taskId: t.id, generation: t.generation, instanceId: a };
    const back = await worker.requeue(oldRun, { delayMs: 0, failed: false, statusMessage: 'Handed over' });
    expect(back.applied).toBe(true);
    // A retry whose backoff is not over, and a queued task past its ttl: neither is claimable.
    const delayed = await creations.insertWithLimits(newTaskRow(a, 'o-fence'), LIMITS);
    await worker.requeue(
      { taskId: delayed.id, generation: delayed.generation, instanceId: a },
      { delayMs: 60000, failed: true, statusMessage: 'Attempt 1 failed; attempt 2 in 60 s' },
    );
    const expired = await creations.insertWithLimits(
      { ...newTaskRow(a, 'o-fence', 1000), instanceId: null },
      LIMITS,
    );
    const depth = await queue.depth();
    expect(depth).toMatchObject({ delayed: 1 });
    expect(depth.nextDelayedInMs).toBeGreaterThan(55000);
    await sleep(1100);
    const claimed = await queue.claim(b, 10, 30000);
    expect(claimed.map((c) => c.task.id)).toEqual([t.id]);
    const [c] = claimed;
    expect(c.task).toMatchObject({ instanceId: b, generation: t.generation + 2, attempt: 2 });
    expect(c.task.statusMessage).toBe('Running attempt 2');
    // The run that handed it over writes nothing any more; the claimer's run does.
    expect((await worker.setProgressMessage(oldRun, 'late')).applied).toBe(false);
    const claimedRun = { taskId: t.id, generation: c.task.generation, instanceId: b };
    expect((await worker.setProgressMessage(claimedRun, 'step 1')).applied).toBe(true);
    // A second claim finds nothing: the row is leased.
    expect(await queue.claim(randomUUID(), 10, 30000)).toEqual([]);
    const left = await withClient(db.url, (cl) =>
      cl.query(`SELECT id FROM task WHERE id = ANY($1) AND instance_id IS NULL ORDER BY id`, [
        [delayed.id, expired.id],
      ]),
    );
    expect(left.rows.map((r: { id: string }) => r.id).sort()).toEqual([delayed.id, expired.id].sort());
  });

  it('a queued task cancelled before any claim is never claimed', async () => {
    const tasks = web1.get(TasksService);
    const t = (await web1.get(TaskCreationService).create(legacyTaskInput('o-cancel'))).task;
    expect(t).toMatchObject({ instanceId: null, statusMessage: QUEUED_MESSAGE });
    const cancelled = await tasks.cancel('o-cancel', t.id);
    expect(cancelled).toMatchObject({ status: 'cancelled', instanceId: null });
    expect(await web2.get(TaskQueueRepository).claim(randomUUID(), 10, 30000)).toEqual([]);
    expect((await tasks.get('o-cancel', t.id)).status).toBe('cancelled');
  });
});

describe('task claimer of an instance that runs work (real PostgreSQL)', () => {
  let db: TestDatabase;
  let web: INestApplication;
  let worker: INestApplication;
  let exec: ControlledExecutor;

  beforeAll(async () => {
    db = await createTestDatabase('task_claimer');
    exec = new ControlledExecutor();
    web = await createTestApp(db.url, { JANITOR_ENABLED: 'false', INSTANCE_ROLE: 'web' });
    worker = await createTestApp(
      db.url,
      // A slow safety poll: what the test sees comes from the bus wake, not from polling.
      { JANITOR_ENABLED: 'false', TASK_WORKER_CONCURRENCY: '2', TASK_CLAIM_POLL_MS: '600000' },
      [],
      { taskWork: exec },
    );
  });
  afterAll(async () => {
    await Promise.all([web?.close(), worker?.close()]);
    await db?.drop();
  });

  it('web queues every creation; the worker runs at most TASK_WORKER_CONCURRENCY of them at once', async () => {
    const owner = 'o-bound';
    const tasks = web.get(TasksService);
    const made = [];
    for (let i = 0; i < 5; i++)
      made.push(
        (await web.get(TaskCreationService).create(legacyTaskInput(owner, { principal: PRINCIPAL }))).task,
      );
    for (const t of made) {
      expect(t).toMatchObject({ instanceId: null, statusMessage: QUEUED_MESSAGE });
      expect(t.availableAt).toBeInstanceOf(Date);
    }
    const workerId = worker.get(InstancesService).instanceId;
    await waitFor(() => exec.runs.length >= 2 || undefined);
    await sleep(300);
    expect(exec.runs).toHaveLength(2);
    expect(worker.get(TaskClaimer).slots()).toEqual({ busy: 2, free: 0 });
    // The claimed run calls the tool as the creating caller (the stored principal), and shows as running.
    expect(exec.runs[0].ctx.storedPrincipal).toEqual(PRINCIPAL);
    const first = await tasks.get(owner, exec.runs[0].task.id);
    expect(first).toMatchObject({ instanceId: workerId, statusMessage: null });
    const waiting = made.find((t) => !exec.runs.some((r) => r.task.id === t.id));
    expect((await tasks.get(owner, waiting!.id)).statusMessage).toBe(QUEUED_MESSAGE);
    // Each run that ends frees a slot, which the claimer fills at once (no poll: it is 10 minutes).
    for (let i = 0; i < 5; i++) {
      exec.runs[i].complete();
      await waitFor(() => exec.runs.length >= Math.min(5, i + 3) || undefined);
      expect(exec.runs.length - (i + 1)).toBeLessThanOrEqual(2);
    }
    for (const t of made) {
      const w = await tasks.waitForTerminal(owner, t.id, { timeoutMs: 5000 });
      expect(w.kind === 'terminal' && w.task.status).toBe('completed');
    }
    expect(exec.runs).toHaveLength(5);
    expect(await metricValue(worker, 'mcp_task_claims_total')).toBe(5);
    expect(await metricValue(worker, 'mcp_task_queue_depth', { state: 'ready' })).toBe(0);
  });

  it('an instance with a free slot leases a new task to itself; a resume with none goes to the queue', async () => {
    const owner = 'o-fast';
    const tasks = worker.get(TasksService);
    const me = worker.get(InstancesService).instanceId;
    // The last runs give their slots back once their outcomes are written.
    await waitFor(() => worker.get(TaskClaimer).slots().free === 2 || undefined);
    const t = (
      await worker.get(TaskCreationService).create(legacyTaskInput(owner, { era: 'modern', sessionId: null }))
    ).task;
    expect(t).toMatchObject({ instanceId: me, availableAt: null, statusMessage: null });
    const run = await exec.run(t.id);
    run.park({ q: { method: 'elicitation/create', params: { message: 'why?', requestedSchema: {} } } });
    await waitFor(async () => (await tasks.get(owner, t.id)).status === 'input_required' || undefined);
    // The web instance takes the answer: it runs no work, so the resumed task is queued for the worker.
    const r = await web.get(TasksService).submitInput(owner, t.id, { 'r1.q': { action: 'accept' } });
    expect(r.resumed).toBe(true);
    expect(r.task).toMatchObject({ status: 'working', instanceId: null, statusMessage: QUEUED_MESSAGE });
    const resumed = await exec.run(t.id, 1);
    expect(resumed.task.instanceId).toBe(me);
    expect(resumed.ctx.answers).toEqual({ 'r1.q': { action: 'accept' } });
    resumed.complete();
    const w = await tasks.waitForTerminal(owner, t.id, { timeoutMs: 5000 });
    expect(w.kind === 'terminal' && w.task.status).toBe('completed');
  });

  it('claims a delayed task when its backoff ends, woken by one timer for the earliest (no poll)', async () => {
    const creations = worker.get(TaskCreationRepository);
    const workerRepo = worker.get(TaskWorkerRepository);
    await waitFor(() => worker.get(TaskClaimer).slots().free === 2 || undefined);
    // Two runs of another (gone) instance give their tasks back, to be retried in 1.5 s and 0.7 s.
    const gone = randomUUID();
    const requeued = async (delayMs: number): Promise<{ id: string; at: number }> => {
      const t = await creations.insertWithLimits(newTaskRow(gone, 'o-delay'), LIMITS);
      const r = await workerRepo.requeue(
        { taskId: t.id, generation: t.generation, instanceId: gone },
        { delayMs, failed: true, statusMessage: `retry in ${delayMs} ms` },
      );
      if (!r.applied) throw new Error('requeue refused');
      return { id: t.id, at: r.task.availableAt!.getTime() };
    };
    const later = await requeued(1500);
    const sooner = await requeued(700);
    const seen = new Map<string, number>();
    await waitFor(
      () => {
        for (const r of exec.runs) if (!seen.has(r.task.id)) seen.set(r.task.id, Date.now());
        return (seen.has(later.id) && seen.has(sooner.id)) || undefined;
      },
      5000,
      5,
    );
    // Each started at its own time (a little after, never before), not at a 10-minute poll.
    for (const t of [sooner, later]) {
      const lateBy = seen.get(t.id)! - t.at;
      expect(lateBy).toBeGreaterThanOrEqual(-20);
      expect(lateBy).toBeLessThan(1500);
    }
    for (const r of exec.runs.filter((x) => x.task.id === sooner.id || x.task.id === later.id)) {
      expect(r.task.attempt).toBe(2);
      r.complete();
    }
  });
});
