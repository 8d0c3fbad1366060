import type { INestApplication } from '@nestjs/common';
import { createTestApp } from '../../../test/support/test-app.js';
import { newTaskRow } from '../../../test/support/task-registry.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import {
  ControlledExecutor,
  metricValue,
  sleep,
  waitFor,
} from '../../../test/support/controlled-executor.js';
import { PgBusService } from '../../bus/pg-bus.service.js';
import { InstancesService } from '../../instances/instances.service.js';
import { LifecycleService } from '../../lifecycle/lifecycle.service.js';
import { TaskCreationRepository, type NewTask } from '../store/task-creation.repository.js';
import { queuedNotice, TASK_QUEUE_CHANNEL, type QueuedNotice } from '../task-queue.js';
import { RetryableFailure } from './task-retry.js';
import { TaskRunnerService } from './task-runner.service.js';

const LIMITS = { maxPerOwner: 100, maxTotal: 1000, maxRetainedPerOwner: 1000 };
const ENV = {
  JANITOR_ENABLED: 'false',
  // A drain that waited out the grace would take a minute: the hand-over must not.
  SHUTDOWN_GRACE_MS: '60000',
  TASK_LOCK_TIMEOUT_MS: '300',
};

/**
 * The drain hands resumable work over (issue 22, item 5), on real PostgreSQL: when the drain is announced
 * (SIGTERM), a running resumable task goes back to the queue as its next attempt, without counting as a
 * failure and without waiting for the grace period, its run is aborted and its late outcome ignored; a
 * plain task keeps today's grace, then fails. When the hand-over cannot be written, the task is left as a
 * lost worker's, and the rescue re-queues it.
 */
describe('hand-over of resumable runs at shutdown (real PostgreSQL)', () => {
  let db: TestDatabase;
  const notices: QueuedNotice[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('task_handover');
  });
  afterAll(async () => {
    await db.drop();
  });

  const startOn = async (app: INestApplication, row: Partial<NewTask>) => {
    const me = app.get(InstancesService).instanceId;
    const task = await app
      .get(TaskCreationRepository)
      .insertWithLimits({ ...newTaskRow(me, 'h-owner'), ...row }, LIMITS);
    app.get(TaskRunnerService).start(task);
    return task;
  };
  const row = async (id: string) =>
    withClient(db.url, async (c) => {
      const r = await c.query(
        `SELECT status, status_message, error, result, instance_id, generation::int, attempt, failed_attempts,
                available_at IS NOT NULL AS queued
           FROM task WHERE id = $1`,
        [id],
      );
      return r.rows[0];
    });

  it('releases a resumable run the moment the drain is announced; a plain run keeps its grace', async () => {
    const exec = new ControlledExecutor();
    const app = await createTestApp(db.url, ENV, [], { taskWork: exec });
    app.get(PgBusService).subscribe(TASK_QUEUE_CHANNEL, (p) => {
      const n = queuedNotice(p);
      if (n) notices.push(n);
    });
    let closed = false;
    try {
      const resumable = await startOn(app, { resumable: true, maxAttempts: 3 });
      const plain = await startOn(app, {});
      const [run, plainRun] = [await exec.run(resumable.id), await exec.run(plain.id)];

      app.get(LifecycleService).announceDrain();
      await waitFor(() => run.ctx.signal.aborted, 2000);
      expect(await row(resumable.id)).toEqual({
        status: 'working',
        status_message: 'Handed over at shutdown: attempt 2 waits for a worker',
        error: null,
        result: null,
        instance_id: null,
        generation: resumable.generation + 1,
        attempt: 2,
        // A hand-over is not a failure: five deploys never use up a task's attempts.
        failed_attempts: 0,
        queued: true,
      });
      await waitFor(() => notices.find((n) => n.taskId === resumable.id));
      expect(await metricValue(app, 'mcp_task_handovers_total', { tool: 't' })).toBe(1);

      // The handler's late answer is refused: the task stays queued for its next attempt.
      run.complete({ content: [{ type: 'text', text: 'too late' }] });
      // The draining instance claims nothing, not even what it just gave back; the plain run goes on.
      await sleep(500);
      expect(await row(resumable.id)).toMatchObject({ status: 'working', instance_id: null, result: null });
      expect(plainRun.ctx.signal.aborted).toBe(false);
      expect(await row(plain.id)).toMatchObject({
        status: 'working',
        instance_id: app.get(InstancesService).instanceId,
      });

      const t0 = Date.now();
      await app.close();
      closed = true;
      expect(Date.now() - t0).toBeLessThan(10000);
      expect(plainRun.ctx.signal.aborted).toBe(true);
      expect(await row(plain.id)).toMatchObject({
        status: 'failed',
        error: { code: -32603, message: 'server shutting down' },
      });
      expect(await row(resumable.id)).toMatchObject({ status: 'working', attempt: 2, instance_id: null });
    } finally {
      if (!closed) await app.close();
    }
  });

  it('records a retryable failure during a drain as a failed attempt with its backoff, never a free hand-over', async () => {
    const exec = new ControlledExecutor();
    const app = await createTestApp(db.url, ENV, [], { taskWork: exec });
    try {
      app.get(LifecycleService).announceDrain();
      // Started while the instance drains: the launch hands it over, and the run fails meanwhile.
      const task = await startOn(app, { resumable: true, maxAttempts: 3 });
      const run = await exec.run(task.id);
      run.throwError(
        new RetryableFailure(
          { code: -32603, message: 'upstream refused' },
          { initialDelayMs: 60000, factor: 2, maxDelayMs: 60000 },
        ),
      );
      await waitFor(async () => (await row(task.id)).generation > task.generation, 5000);
      await sleep(300);
      const r = await withClient(
        db.url,
        async (c) =>
          (
            await c.query(
              `SELECT failed_attempts, last_error, available_at > now() + interval '30 seconds' AS backed_off
               FROM task WHERE id = $1`,
              [task.id],
            )
          ).rows[0],
      );
      expect(r).toEqual({
        failed_attempts: 1,
        last_error: { code: -32603, message: 'upstream refused' },
        backed_off: true,
      });
    } finally {
      await app.close();
    }
  });

  it('ends a resumable run waiting for legacy input on its stream as a plain run (it cannot move)', async () => {
    const exec = new ControlledExecutor();
    const app = await createTestApp(db.url, ENV, [], { taskWork: exec });
    let closed = false;
    try {
      const waiting = await startOn(app, { resumable: true, maxAttempts: 3 });
      const run = await exec.run(waiting.id);
      expect(await run.ctx.setStatus('input_required', 'waiting for the answer on this stream')).toBe(true);
      app.get(LifecycleService).announceDrain();
      await sleep(500);
      // Refused (not a working task): the run goes on, as a plain one would through the grace.
      expect(run.ctx.signal.aborted).toBe(false);
      expect(await row(waiting.id)).toMatchObject({
        status: 'input_required',
        instance_id: app.get(InstancesService).instanceId,
        attempt: 1,
      });
      await app.close();
      closed = true;
      expect(run.ctx.signal.aborted).toBe(true);
      expect(await row(waiting.id)).toMatchObject({
        status: 'failed',
        error: { code: -32603, message: 'server shutting down' },
      });
    } finally {
      if (!closed) await app.close();
    }
  });

  it('leaves a run whose hand-over cannot be written to the rescue, never failing it', async () => {
    const exec = new ControlledExecutor();
    const app = await createTestApp(db.url, ENV, [], { taskWork: exec });
    let closed = false;
    try {
      const resumable = await startOn(app, { resumable: true, maxAttempts: 3 });
      const run = await exec.run(resumable.id);
      // Another transaction holds the row: every hand-over write times out (TASK_LOCK_TIMEOUT_MS).
      await withClient(db.url, async (c) => {
        await c.query('BEGIN');
        await c.query('SELECT id FROM task WHERE id = $1 FOR UPDATE', [resumable.id]);
        app.get(LifecycleService).announceDrain();
        await sleep(800);
        // The write failed: the run goes on (it may still finish) rather than being dropped.
        expect(run.ctx.signal.aborted).toBe(false);
        await app.close();
        closed = true;
        await c.query('ROLLBACK');
      });
      expect(run.ctx.signal.aborted).toBe(true);
      expect(await row(resumable.id)).toMatchObject({
        status: 'working',
        instance_id: app.get(InstancesService).instanceId,
        attempt: 1,
        failed_attempts: 0,
      });
      // The next instance finds the stopped one's task and re-queues it, the lost run counted as failed.
      const next = await createTestApp(db.url, { ...ENV, INSTANCE_ROLE: 'web' });
      try {
        expect(await row(resumable.id)).toMatchObject({
          status: 'working',
          status_message: 'Rescued: the worker of attempt 1 was lost; attempt 2 waits for a worker',
          instance_id: null,
          attempt: 2,
          failed_attempts: 1,
        });
      } finally {
        await next.close();
      }
    } finally {
      if (!closed) await app.close();
    }
  });
});
