import type { INestApplication } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import {
  ControlledExecutor,
  metricValue,
  sleep,
  waitFor,
  type ControlledRun,
} from '../../../test/support/controlled-executor.js';
import { PgBusService } from '../../bus/pg-bus.service.js';
import { InstancesRepository } from '../../instances/instances.repository.js';
import { InstancesService } from '../../instances/instances.service.js';
import { JanitorService } from '../../janitor/janitor.service.js';
import { TaskRunnerService } from '../execution/task-runner.service.js';
import { TaskError, TaskErrorCode } from '../tasks.errors.js';
import { TaskWorkerRepository } from './task-worker.repository.js';
import { TASK_CHANNEL } from './task-change-publisher.js';
import type { CommitGroupListener } from '../../database/commit-group.js';
import { TasksService } from '../registry/tasks.service.js';
import { TaskCreationService, type CreateTaskInput } from '../execution/task-creation.service.js';
import { TaskCommitGroups } from './task-commit-groups.js';

const LOCK_TIMEOUT_MS = 200;
const LEASE_MS = 3000;
/** Long enough for the lock-held tests (1 s), short enough for the give-up test. */
const WRITE_RETRY_MS = 2500;

const ask = (message: string) => ({ method: 'elicitation/create', params: { message, requestedSchema: {} } });

/**
 * Faults on the task/worker path, on real PostgreSQL: writes after created + ttl, a final write stuck behind
 * a row lock, renewals that find a run's task changed, a skewed app clock, and the janitor after a database
 * failure. One instance with a short lock_timeout and lease, no periodic janitor (tests call it).
 */
describe('task faults on real PostgreSQL', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let tasks: TasksService;
  let worker: TaskWorkerRepository;
  let runner: TaskRunnerService;
  let janitor: JanitorService;
  let exec: ControlledExecutor;
  let me: string;

  const input = (ownerId: string, extra: Partial<CreateTaskInput> = {}): CreateTaskInput => ({
    ownerId,
    era: 'modern',
    sessionId: null,
    toolName: 'fault_tool',
    requestParams: { name: 'fault_tool', arguments: {} },
    ...extra,
  });
  const row = async (id: string) =>
    (
      await withClient(db.url, (c) =>
        c.query(
          'SELECT status, status_message, generation, instance_id, result, error FROM task WHERE id = $1',
          [id],
        ),
      )
    ).rows[0];
  /** Puts created + ttl in the past by the database clock, as if the ttl ran out unswept. */
  const pastTtl = (id: string) =>
    withClient(db.url, (c) =>
      c.query(`UPDATE task SET expires_at = now() - interval '1 millisecond' WHERE id = $1`, [id]),
    );
  const parkedTask = async (owner: string) => {
    const t = (await app.get(TaskCreationService).create(input(owner))).task;
    (await exec.run(t.id, 0)).park({ ok: ask('Go on?') });
    await waitFor(async () => (await row(t.id)).status === 'input_required' || undefined);
    return t;
  };

  beforeAll(async () => {
    db = await createTestDatabase('task_faults');
    exec = new ControlledExecutor();
    app = await createTestApp(
      db.url,
      {
        JANITOR_ENABLED: 'false',
        TASK_LOCK_TIMEOUT_MS: String(LOCK_TIMEOUT_MS),
        TASK_LEASE_MS: String(LEASE_MS),
        TASK_PROGRESS_WRITE_MS: '0',
        TASK_WRITE_RETRY_MS: String(WRITE_RETRY_MS),
      },
      [],
      { taskWork: exec },
    );
    tasks = app.get(TasksService);
    worker = app.get(TaskWorkerRepository);
    runner = app.get(TaskRunnerService);
    janitor = app.get(JanitorService);
    me = app.get(InstancesService).instanceId;
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  describe('created + ttl ends the task on every write path', () => {
    it('an answer to a parked task past its ttl expires it instead of resuming the tool', async () => {
      const owner = 'owner-ttl-update';
      const t = await parkedTask(owner);
      await pastTtl(t.id);
      const expiredBefore = await metricValue(app, 'mcp_tasks_finished_total', { status: 'expired' });
      const r = await tasks.submitInput(owner, t.id, { 'r1.ok': { action: 'accept' } });
      expect(r).toMatchObject({ resumed: false, accepted: [], ignored: ['r1.ok'], expired: true });
      expect(await row(t.id)).toMatchObject({ status: 'failed', status_message: 'Task expired' });
      await sleep(200);
      expect(exec.runs.filter((x) => x.task.id === t.id)).toHaveLength(1); // never ran again
      expect(await metricValue(app, 'mcp_tasks_finished_total', { status: 'expired' })).toBe(
        expiredBefore + 1,
      );
    });

    it('cancel of a task past its ttl answers as for an expired task (terminal failed)', async () => {
      const owner = 'owner-ttl-cancel';
      const t = await parkedTask(owner);
      await pastTtl(t.id);
      const err = await tasks.cancel(owner, t.id).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(TaskError);
      expect((err as TaskError).code).toBe(TaskErrorCode.TASK_TERMINAL);
      expect(await row(t.id)).toMatchObject({ status: 'failed', status_message: 'Task expired' });
    });

    it('a worker completing, failing or parking past the ttl expires the task instead', async () => {
      const owner = 'owner-ttl-worker';
      for (const finish of ['complete', 'fail', 'park'] as const) {
        const t = (await app.get(TaskCreationService).create(input(owner))).task;
        const run = await exec.run(t.id, 0);
        await pastTtl(t.id);
        if (finish === 'complete') run.complete();
        else if (finish === 'fail') run.fail(-32000, 'nope');
        else run.park({ ok: ask('More?') });
        const r = await waitFor(async () => {
          const cur = await row(t.id);
          return cur.status !== 'working' ? cur : undefined;
        });
        expect(r).toMatchObject({ status: 'failed', status_message: 'Task expired', result: null });
      }
    });

    it('a lease renewal expires the runs past their ttl and aborts them', async () => {
      const t = (await app.get(TaskCreationService).create(input('owner-ttl-renew'))).task;
      const run = await exec.run(t.id, 0);
      await pastTtl(t.id);
      const r = await worker.renewLeases(me, [t.id], LEASE_MS);
      expect(r.held.has(t.id)).toBe(false);
      expect(r.expired.map((x) => x.id)).toEqual([t.id]);
      expect(await row(t.id)).toMatchObject({ status: 'failed', status_message: 'Task expired' });
      await waitFor(() => run.ctx.signal.aborted || undefined);
    });
  });

  describe('a final write that fails is retried while the lease is held', () => {
    it('holds the row lock past TASK_LOCK_TIMEOUT_MS while the worker completes: the result lands after release', async () => {
      const t = (await app.get(TaskCreationService).create(input('owner-lock'))).task;
      const run = await exec.run(t.id, 0);
      const holder = new pg.Client({ connectionString: db.url });
      await holder.connect();
      const retriesBefore = await metricValue(app, 'mcp_task_write_retries_total', { op: 'complete' });
      const holdMs = 5 * LOCK_TIMEOUT_MS;
      let releasedAt = 0;
      try {
        await holder.query('BEGIN');
        await holder.query('SELECT 1 FROM task WHERE id = $1 FOR UPDATE', [t.id]);
        run.complete({ content: [{ type: 'text', text: 'kept' }] });
        await sleep(holdMs);
        expect((await row(t.id)).status).toBe('working');
        await holder.query('ROLLBACK');
        releasedAt = performance.now();
      } finally {
        await holder.end();
      }
      const done = await waitFor(async () => {
        const cur = await row(t.id);
        return cur.status === 'completed' ? cur : undefined;
      }, 10000);
      const landedAfterMs = performance.now() - releasedAt;
      expect(done.result).toEqual({ content: [{ type: 'text', text: 'kept' }] });
      const extra =
        (await metricValue(app, 'mcp_task_write_retries_total', { op: 'complete' })) - retriesBefore;
      expect(extra).toBeGreaterThan(0);
      console.log(
        `lock held ${holdMs} ms (lock_timeout ${LOCK_TIMEOUT_MS} ms): the result landed after ${extra + 1} attempts, ` +
          `${Math.round(landedAfterMs)} ms after the lock was released`,
      );
    });

    it('a connection reset under the final write: the retry lands on a fresh connection', async () => {
      const t = (await app.get(TaskCreationService).create(input('owner-reset'))).task;
      const run = await exec.run(t.id, 0);
      const holder = new pg.Client({ connectionString: db.url });
      await holder.connect();
      const retriesBefore = await metricValue(app, 'mcp_task_write_retries_total', { op: 'complete' });
      try {
        await holder.query('BEGIN');
        await holder.query('SELECT 1 FROM task WHERE id = $1 FOR UPDATE', [t.id]);
        run.complete({ content: [{ type: 'text', text: 'survived' }] });
        // The worker's write waits for the row lock: end its backend, as a failover or a proxy reset would.
        const killed = await waitFor(async () => {
          const r = await holder.query(
            `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`,
          );
          return r.rows.some((x: { ok: boolean }) => x.ok) || undefined;
        });
        expect(killed).toBe(true);
      } finally {
        await holder.query('ROLLBACK');
        await holder.end();
      }
      const done = await waitFor(async () => {
        const cur = await row(t.id);
        return cur.status === 'completed' ? cur : undefined;
      }, 10000);
      expect(done.result).toEqual({ content: [{ type: 'text', text: 'survived' }] });
      expect(await metricValue(app, 'mcp_task_write_retries_total', { op: 'complete' })).toBeGreaterThan(
        retriesBefore,
      );
    });

    it('gives up after TASK_WRITE_RETRY_MS, and counts it', async () => {
      const t = (await app.get(TaskCreationService).create(input('owner-lock-lost'))).task;
      const run = await exec.run(t.id, 0);
      const holder = new pg.Client({ connectionString: db.url });
      await holder.connect();
      const failuresBefore = await metricValue(app, 'mcp_task_write_failures_total', { op: 'complete' });
      try {
        await holder.query('BEGIN');
        await holder.query('SELECT 1 FROM task WHERE id = $1 FOR UPDATE', [t.id]);
        run.complete();
        await waitFor(
          async () =>
            (await metricValue(app, 'mcp_task_write_failures_total', { op: 'complete' })) > failuresBefore ||
            undefined,
          2 * WRITE_RETRY_MS + 2000,
        );
      } finally {
        await holder.query('ROLLBACK');
        await holder.end();
      }
      await waitFor(() => !runner.isRunning(t.id) || undefined);
      expect((await row(t.id)).status).toBe('working'); // left for the janitor: "worker lost" after the lease
    });
  });

  describe('an outcome PostgreSQL can never store fails the task at once', () => {
    const settledRow = (id: string, ms = WRITE_RETRY_MS - 1000) =>
      waitFor(async () => {
        const cur = await row(id);
        return cur.status !== 'working' ? cur : undefined;
      }, ms);
    const retries = async () =>
      (await metricValue(app, 'mcp_task_write_retries_total', { op: 'complete' })) +
      (await metricValue(app, 'mcp_task_write_retries_total', { op: 'fail' })) +
      (await metricValue(app, 'mcp_task_write_retries_total', { op: 'park' }));

    it('a NUL character in a result, an error or an input request: failed saying where, never retried', async () => {
      const owner = 'owner-nul';
      const cases = [
        {
          finish: (r: ControlledRun) => r.complete({ content: [{ type: 'text', text: 'Hello Ada\u0000' }] }),
          message:
            "The tool's result could not be stored: result.content[0].text contains a NUL character (\\u0000)",
        },
        {
          finish: (r: ControlledRun) => r.fail(-32000, 'no such user: Ada\u0000'),
          message: "The tool's error could not be stored: error.message contains a NUL character (\\u0000)",
        },
        {
          finish: (r: ControlledRun) => r.park({ name: ask('Ada\u0000?') }),
          message:
            "The tool's input request could not be stored: input.requests.name.params.message contains a NUL character (\\u0000)",
        },
      ];
      const retriesBefore = await retries();
      for (const { finish, message } of cases) {
        const t = (await app.get(TaskCreationService).create(input(owner))).task;
        finish(await exec.run(t.id, 0));
        expect(await settledRow(t.id)).toMatchObject({
          status: 'failed',
          status_message: message,
          result: null,
          error: { code: -32603, message },
        });
        await waitFor(() => !runner.isRunning(t.id) || undefined);
      }
      expect(await retries()).toBe(retriesBefore);
    });

    it('a poison outcome PostgreSQL refuses (class 22) fails alone; the others of its group complete', async () => {
      const owner = 'owner-poison';
      const groups: Array<{ kind: string; size: number; fellBack: boolean }> = [];
      let listening = true;
      const onGroup: CommitGroupListener = (kind, size, fellBack) => {
        if (listening) groups.push({ kind, size, fellBack });
      };
      app.get(TaskCommitGroups).onGroup(onGroup);
      const made = await Promise.all(
        Array.from({ length: 5 }, () =>
          app
            .get(TaskCreationService)
            .create(input(owner))
            .then((c) => c.task),
        ),
      );
      const runs = await Promise.all(made.map((t) => exec.run(t.id, 0)));
      const retriesBefore = await retries();
      // An unpaired surrogate has no UTF-8 form: jsonb refuses it (22P02) however often it is sent.
      runs.forEach((r, i) =>
        r.complete({ content: [{ type: 'text', text: i === 2 ? 'bad \ud800' : `fine ${i}` }] }),
      );
      const rows = await Promise.all(made.map((t) => settledRow(t.id)));
      listening = false;
      rows.forEach((r, i) => {
        if (i === 2) {
          expect(r).toMatchObject({
            status: 'failed',
            error: {
              code: -32603,
              message:
                "The tool's result could not be stored: result.content[0].text contains an unpaired UTF-16 surrogate",
            },
          });
        } else {
          expect(r).toMatchObject({ status: 'completed', result: { content: [{ text: `fine ${i}` }] } });
        }
      });
      // The poison's group rolled back as a whole and each of its outcomes went on alone.
      expect(groups.some((g) => g.kind === 'finish' && g.size > 1 && g.fellBack)).toBe(true);
      expect(await retries()).toBe(retriesBefore);
    });
  });

  describe('runs are judged by generation', () => {
    it('a late notification of an earlier generation does not abort the run resumed after it', async () => {
      const owner = 'owner-gen-bus';
      const t = await parkedTask(owner);
      const parked = await tasks.get(owner, t.id);
      await tasks.submitInput(owner, t.id, { 'r1.ok': { action: 'accept' } });
      const second = await exec.run(t.id, 1);
      // The park's own change notification, arriving (again) after the resume.
      await app.get(PgBusService).publish(TASK_CHANNEL, {
        taskId: t.id,
        ownerId: owner,
        sessionId: null,
        era: 'modern',
        status: 'input_required',
        previousStatus: 'working',
        generation: parked.generation,
      });
      await sleep(300);
      expect(second.ctx.signal.aborted).toBe(false);
      second.complete();
      await waitFor(async () => (await row(t.id)).status === 'completed' || undefined);
    });

    it('a renewal that finds the task at another generation aborts that run and settles it at once', async () => {
      const t = (await app.get(TaskCreationService).create(input('owner-gen-renew'))).task;
      const run = await exec.run(t.id, 0);
      // The task moved on (say, resumed elsewhere) and its notification was lost: only the renewal can tell.
      await withClient(db.url, (c) =>
        c.query('UPDATE task SET generation = generation + 1 WHERE id = $1', [t.id]),
      );
      await waitFor(() => run.ctx.signal.aborted || undefined, 3 * LEASE_MS);
      // Dropped from this instance at once, without waiting for the worker to return.
      expect(runner.isRunning(t.id)).toBe(false);
      expect((await row(t.id)).status).toBe('working');
    });
  });

  describe('the database clock decides', () => {
    const RealDate = Date;
    function skewAppClock(offsetMs: number): () => void {
      class SkewedDate extends RealDate {
        constructor(...args: unknown[]) {
          if (args.length === 0) super(RealDate.now() + offsetMs);
          else super(...(args as [string | number]));
        }
        static override now(): number {
          return RealDate.now() + offsetMs;
        }
      }
      globalThis.Date = SkewedDate as DateConstructor;
      return () => {
        globalThis.Date = RealDate;
      };
    }

    it('an app clock two hours fast neither expires a live task nor shortens a wait', async () => {
      const owner = 'owner-skew-fast';
      const t = (await app.get(TaskCreationService).create(input(owner, { requestedTtlMs: 60000 }))).task;
      const run = await exec.run(t.id, 0);
      const restore = skewAppClock(2 * 3600 * 1000);
      try {
        expect((await tasks.get(owner, t.id)).status).toBe('working');
        const waited = await tasks.waitForTerminal(owner, t.id, { timeoutMs: 300 });
        expect(waited.kind).toBe('timeout');
        const renewed = await worker.renewLeases(me, [t.id], LEASE_MS);
        expect(renewed.held.get(t.id)?.renewed).toBe(true);
      } finally {
        restore();
      }
      expect(run.ctx.signal.aborted).toBe(false);
      run.complete();
      await waitFor(async () => (await row(t.id)).status === 'completed' || undefined);
    });

    it('an app clock an hour slow does not delay a waiter past the expiry', async () => {
      const owner = 'owner-skew-wait';
      const ttlMs = 1500;
      const t = (await app.get(TaskCreationService).create(input(owner, { requestedTtlMs: ttlMs }))).task;
      // Parked, so no lease renewal (which also expires due runs) can wake the waiter: only its own timer.
      (await exec.run(t.id, 0)).park({ ok: ask('Go on?') });
      await waitFor(async () => (await row(t.id)).status === 'input_required' || undefined);
      const restore = skewAppClock(-3600 * 1000);
      const started = performance.now();
      let waited: Awaited<ReturnType<TasksService['waitForTerminal']>>;
      try {
        waited = await tasks.waitForTerminal(owner, t.id, { timeoutMs: 30000 });
      } finally {
        restore();
      }
      const elapsed = performance.now() - started;
      expect(waited.kind).toBe('terminal');
      expect(waited.kind === 'terminal' && waited.task.statusMessage).toBe('Task expired');
      // Woken at the expiry the database computed, not at the next 5 s safety poll an hour-off clock leads to.
      expect(elapsed).toBeLessThan(ttlMs + 2500);
    });

    it('an app clock an hour slow does not make the heartbeat or the lease look stale', async () => {
      const t = (await app.get(TaskCreationService).create(input('owner-skew-slow'))).task;
      const run = await exec.run(t.id, 0);
      const restore = skewAppClock(-3600 * 1000);
      try {
        await app.get(InstancesRepository).heartbeat(me);
        await worker.renewLeases(me, [t.id], LEASE_MS);
      } finally {
        restore();
      }
      const [r] = (
        await withClient(db.url, (c) =>
          c.query(
            `SELECT extract(epoch FROM now() - si.heartbeat_at) AS hb_age,
                    extract(epoch FROM t.lease_expires_at - now()) AS lease_left
             FROM service_instance si, task t WHERE si.id = $1 AND t.id = $2`,
            [me, t.id],
          ),
        )
      ).rows;
      expect(Number(r.hb_age)).toBeLessThan(5);
      expect(Number(r.lease_left)).toBeGreaterThan(0);
      // The janitor, judging by the database clock, finds nothing to rescue here.
      await janitor.runOnce();
      expect((await row(t.id)).status).toBe('working');
      run.complete();
      await waitFor(async () => (await row(t.id)).status === 'completed' || undefined);
    });
  });

  describe('after a database failure', () => {
    it('the janitor waits one lease period before failing lapsed leases as "worker lost"', async () => {
      // A task whose worker lives on another instance and could not renew during the outage.
      const t = (await app.get(TaskCreationService).create(input('owner-outage'), { placement: 'here' }))
        .task;
      await withClient(db.url, (c) =>
        c.query(
          `UPDATE task SET instance_id = $2, lease_expires_at = now() - interval '1 second' WHERE id = $1`,
          [t.id, randomUUID()],
        ),
      );
      // A real failure seen by this instance: its janitor's next batch hits a missing table.
      await withClient(db.url, (c) => c.query('ALTER TABLE task RENAME TO task_away'));
      try {
        await expect(janitor.runOnce()).rejects.toThrow();
      } finally {
        await withClient(db.url, (c) => c.query('ALTER TABLE task_away RENAME TO task'));
      }
      const failedAt = performance.now();
      const inGrace = await janitor.runOnce();
      expect(inGrace.rows.lease_lapsed).toBe(0);
      expect((await row(t.id)).status).toBe('working');
      await sleep(Math.max(0, LEASE_MS - (performance.now() - failedAt)) + 100);
      const after = await janitor.runOnce();
      expect(after.rows.lease_lapsed).toBeGreaterThanOrEqual(1);
      expect(await row(t.id)).toMatchObject({
        status: 'failed',
        status_message: 'worker lost: the server running this task stopped',
      });
    });
  });
});
