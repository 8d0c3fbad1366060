import { legacyTaskInput } from '../../../test/support/task-registry.js';
import type { INestApplication } from '@nestjs/common';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import {
  ControlledExecutor,
  metricValue,
  sleep,
  waitFor,
} from '../../../test/support/controlled-executor.js';
import { InstancesService } from '../../instances/instances.service.js';
import { JanitorService } from '../../janitor/janitor.service.js';
import { TaskRunnerService } from '../execution/task-runner.service.js';
import { TaskError, TaskErrorCode } from '../tasks.errors.js';
import { TaskOutcomesRepository } from '../store/task-outcomes.repository.js';
import { TasksService } from './tasks.service.js';
import { newTaskId } from '../task-ids.js';
import { TaskCreationService } from '../execution/task-creation.service.js';

async function caught(p: Promise<unknown>): Promise<TaskError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof TaskError) return err;
    throw err;
  }
  throw new Error('expected a TaskError');
}

describe('task registry on real PostgreSQL (one instance)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let tasks: TasksService;
  let outcomes: TaskOutcomesRepository;
  let runner: TaskRunnerService;
  let exec: ControlledExecutor;
  let me: string;

  const input = legacyTaskInput;

  beforeAll(async () => {
    db = await createTestDatabase('tasks');
    exec = new ControlledExecutor();
    app = await createTestApp(db.url, { JANITOR_ENABLED: 'false' }, [], { taskWork: exec });
    tasks = app.get(TasksService);
    outcomes = app.get(TaskOutcomesRepository);
    runner = app.get(TaskRunnerService);
    me = app.get(InstancesService).instanceId;
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  describe('creation', () => {
    it('commits before returning, with a 144-bit url-safe id, the granted ttl and the poll hint', async () => {
      const t = (
        await app
          .get(TaskCreationService)
          .create(input('owner-create', { requestedTtlMs: 60000 }), { placement: 'here' })
      ).task;
      expect(t.id).toMatch(/^[A-Za-z0-9_-]{24}$/);
      expect(t).toMatchObject({
        status: 'working',
        era: 'legacy',
        sessionId: 'sess-1',
        toolName: 'slow_tool',
        ttlMs: 60000,
        pollIntervalMs: 1000,
        generation: 1,
        instanceId: me,
      });
      expect(t.expiresAt.getTime() - t.createdAt.getTime()).toBe(60000);
      // Visible from another connection right away.
      const row = await withClient(db.url, (c) =>
        c.query('SELECT status, request_params FROM task WHERE id = $1', [t.id]),
      );
      expect(row.rows).toEqual([
        { status: 'working', request_params: { name: 'slow_tool', arguments: { n: 1 } } },
      ]);
    });

    it('clamps the requested ttl to TASK_MAX_TTL_MS and defaults it to TASK_DEFAULT_TTL_MS', async () => {
      const big = (
        await app
          .get(TaskCreationService)
          .create(input('owner-ttl', { requestedTtlMs: 10 * 24 * 3600 * 1000 }), { placement: 'here' })
      ).task;
      expect(big.ttlMs).toBe(24 * 3600 * 1000);
      const none = (await app.get(TaskCreationService).create(input('owner-ttl'), { placement: 'here' }))
        .task;
      expect(none.ttlMs).toBe(3600 * 1000);
      const silly = (
        await app
          .get(TaskCreationService)
          .create(input('owner-ttl', { requestedTtlMs: -5 }), { placement: 'here' })
      ).task;
      expect(silly.ttlMs).toBe(3600 * 1000);
    });

    it('150 parallel creates for one owner leave exactly TASK_MAX_PER_OWNER (100) live tasks', async () => {
      const owner = 'owner-limit';
      const results = await Promise.allSettled(
        Array.from({ length: 150 }, () =>
          app
            .get(TaskCreationService)
            .create(input(owner), { placement: 'here' })
            .then((c) => c.task),
        ),
      );
      const ok = results.filter((r) => r.status === 'fulfilled');
      const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(ok).toHaveLength(100);
      expect(refused).toHaveLength(50);
      for (const r of refused) {
        expect(r.reason).toBeInstanceOf(TaskError);
        expect((r.reason as TaskError).code).toBe(TaskErrorCode.LIMIT_EXCEEDED);
        expect((r.reason as TaskError).message).toContain('TASK_MAX_PER_OWNER = 100');
      }
      const live = await withClient(db.url, (c) =>
        c.query(
          `SELECT count(*)::int AS n FROM task WHERE owner_id = $1 AND status IN ('working','input_required')`,
          [owner],
        ),
      );
      expect(live.rows[0].n).toBe(100);
      // Finished tasks do not count: cancelling one frees exactly one slot.
      const first = ok[0].value;
      await tasks.cancel(owner, first.id);
      const again = await Promise.allSettled([
        app
          .get(TaskCreationService)
          .create(input(owner), { placement: 'here' })
          .then((c) => c.task),
        app
          .get(TaskCreationService)
          .create(input(owner), { placement: 'here' })
          .then((c) => c.task),
      ]);
      expect(again.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    });
  });

  describe('ownership', () => {
    it('answers another owner exactly as it answers a random id, on every method', async () => {
      const t = (await app.get(TaskCreationService).create(input('alice'), { placement: 'here' })).task;
      const random = newTaskId();
      const ops = (owner: string, id: string): Promise<unknown>[] => [
        tasks.get(owner, id),
        tasks.cancel(owner, id),
        tasks.submitInput(owner, id, { x: 1 }),
        tasks.waitForTerminal(owner, id, { timeoutMs: 100 }),
      ];
      const foreign = await Promise.all(ops('mallory', t.id).map(caught));
      const missing = await Promise.all(ops('mallory', random).map(caught));
      for (const [i, e] of foreign.entries()) {
        expect({ code: e.code, message: e.message, task: e.task }).toEqual({
          code: TaskErrorCode.TASK_NOT_FOUND,
          message: 'Task not found',
          task: undefined,
        });
        expect({ code: e.code, message: e.message }).toEqual({
          code: missing[i].code,
          message: missing[i].message,
        });
      }
      expect((await tasks.list('mallory')).tasks).toEqual([]);
      expect(await tasks.ownedIds('mallory', [t.id])).toEqual([]);
      expect(await tasks.ownedIds('alice', [random, t.id])).toEqual([t.id]);
      // Alice's task is untouched by Mallory's attempts.
      expect((await tasks.get('alice', t.id)).status).toBe('working');
    });
  });

  describe('transitions under concurrency', () => {
    it('50 parallel transitions on one task leave exactly one winner and a terminal state that never changes', async () => {
      const owner = 'owner-race';
      const t = (await app.get(TaskCreationService).create(input(owner), { placement: 'here' })).task;
      const fence = { taskId: t.id, generation: t.generation, instanceId: me };
      const attempts = Array.from({ length: 50 }, (_, i) => {
        switch (i % 3) {
          case 0:
            return tasks.cancel(owner, t.id).then(
              () => 'cancelled',
              (e: TaskError) => (e.code === TaskErrorCode.TASK_TERMINAL ? 'lost' : Promise.reject(e)),
            );
          case 1:
            return outcomes
              .completeIfCurrent(fence, { content: [], n: i })
              .then((r) => (r.applied ? 'completed' : 'lost'));
          default:
            return outcomes
              .failIfCurrent(fence, { code: -32603, message: `boom ${i}` })
              .then((r) => (r.applied ? 'failed' : 'lost'));
        }
      });
      const endings = await Promise.all(attempts);
      const winners = endings.filter((o) => o !== 'lost');
      expect(winners).toHaveLength(1);
      const final = await tasks.get(owner, t.id);
      expect(final.status).toBe(winners[0]);
      // Nothing changes it afterwards.
      await expect(tasks.cancel(owner, t.id)).rejects.toMatchObject({
        code: TaskErrorCode.TASK_TERMINAL,
        task: final,
      });
      expect((await outcomes.completeIfCurrent(fence, { late: true })).applied).toBe(false);
      expect(
        (await outcomes.failIfCurrent({ ...fence, generation: final.generation }, { code: 1, message: 'x' }))
          .applied,
      ).toBe(false);
      expect(await tasks.get(owner, t.id)).toEqual(final);
    });

    it('200 cancel-versus-complete races each end in exactly one terminal state that stays', async () => {
      const owner = 'owner-races';
      const finals: string[] = [];
      for (let batch = 0; batch < 10; batch++) {
        const created = await Promise.all(
          Array.from({ length: 20 }, () =>
            app
              .get(TaskCreationService)
              .create(input(owner), { placement: 'here' })
              .then((c) => c.task),
          ),
        );
        const raced = await Promise.all(
          created.map(async (t) => {
            const [c, w] = await Promise.all([
              tasks.cancel(owner, t.id).then(
                () => true,
                () => false,
              ),
              outcomes.completeIfCurrent(
                { taskId: t.id, generation: t.generation, instanceId: me },
                { ok: true },
              ),
            ]);
            expect(Number(c) + Number(w.applied)).toBe(1);
            const after = await tasks.get(owner, t.id);
            expect(after.status).toBe(c ? 'cancelled' : 'completed');
            return after.status;
          }),
        );
        finals.push(...raced);
      }
      expect(finals).toHaveLength(200);
      const rows = await withClient(db.url, (c) =>
        c.query(`SELECT status, count(*)::int AS n FROM task WHERE owner_id = $1 GROUP BY status`, [owner]),
      );
      const total = rows.rows.reduce((s: number, r: { n: number }) => s + r.n, 0);
      expect(total).toBe(200);
      expect(rows.rows.every((r: { status: string }) => ['cancelled', 'completed'].includes(r.status))).toBe(
        true,
      );
    });
  });

  describe('the runner', () => {
    it('runs the executor in the background and records its result', async () => {
      const t = (await app.get(TaskCreationService).create(input('owner-run'))).task;
      const run = await exec.run(t.id);
      expect(run.ctx.signal.aborted).toBe(false);
      expect(runner.isRunning(t.id)).toBe(true);
      run.complete({ content: [{ type: 'text', text: 'hello' }], isError: false });
      const done = await tasks.waitForTerminal('owner-run', t.id, { timeoutMs: 5000 });
      expect(done.kind).toBe('terminal');
      expect(done.kind === 'terminal' && done.task).toMatchObject({
        status: 'completed',
        result: { content: [{ type: 'text', text: 'hello' }], isError: false },
        instanceId: null,
        leaseExpiresAt: null,
      });
      await waitFor(() => !runner.isRunning(t.id));
    });

    it('a late worker write after cancel is dropped and counted, and the abort reached the worker', async () => {
      const before = await metricValue(app, 'mcp_task_stale_completions_total', { tool: 'late_tool' });
      const t = (await app.get(TaskCreationService).create(input('owner-late', { toolName: 'late_tool' })))
        .task;
      const run = await exec.run(t.id);
      const cancelled = await tasks.cancel('owner-late', t.id);
      expect(cancelled.status).toBe('cancelled');
      await waitFor(() => run.ctx.signal.aborted);
      run.complete({ content: [{ type: 'text', text: 'too late' }] });
      await waitFor(async () =>
        (await metricValue(app, 'mcp_task_stale_completions_total', { tool: 'late_tool' })) === before + 1
          ? true
          : undefined,
      );
      const after = await tasks.get('owner-late', t.id);
      expect(after).toMatchObject({ status: 'cancelled', result: null });
      expect(after.generation).toBe(cancelled.generation);
    });

    it('a worker that throws ends its task failed with the error it carried', async () => {
      const t = (await app.get(TaskCreationService).create(input('owner-throw'))).task;
      const run = await exec.run(t.id);
      run.throwError(Object.assign(new Error('Bad thing'), { code: -32000, data: { why: 'x' } }));
      const r = await tasks.waitForTerminal('owner-throw', t.id, { timeoutMs: 5000 });
      expect(r.kind === 'terminal' && r.task).toMatchObject({
        status: 'failed',
        error: { code: -32000, message: 'Bad thing', data: { why: 'x' } },
      });
    });

    it('a worker that throws a database error ends its task failed with a generic error and a correlation id', async () => {
      const pgError = await withClient(db.url, (c) => c.query('SELECT * FROM payroll_secret_table')).catch(
        (e: unknown) => e as Error,
      );
      expect(String((pgError as Error).message)).toContain('payroll_secret_table');
      const t = (await app.get(TaskCreationService).create(input('owner-throw-db'))).task;
      const run = await exec.run(t.id);
      run.throwError(pgError as Error);
      const r = await tasks.waitForTerminal('owner-throw-db', t.id, { timeoutMs: 5000 });
      const failed = r.kind === 'terminal' ? r.task : undefined;
      expect(failed?.status).toBe('failed');
      expect(failed?.error).toEqual({
        code: -32603,
        message: expect.stringMatching(/^Internal error \(correlation id [\w-]+\)$/),
      });
      expect(JSON.stringify(failed)).not.toContain('payroll_secret_table');
    });

    it('escalates work that outlives the inline window and answers inline otherwise', async () => {
      const fast = await app
        .get(TaskCreationService)
        .runInlineThenTask(input('owner-esc', { era: 'modern', sessionId: null }), async () => ({
          kind: 'completed',
          result: { content: [] },
        }));
      expect(fast).toEqual({ kind: 'inline', outcome: { kind: 'completed', result: { content: [] } } });
      expect((await tasks.list('owner-esc')).tasks).toHaveLength(0);

      let signal: AbortSignal | undefined;
      let finish: (() => void) | undefined;
      const slow = await app.get(TaskCreationService).runInlineThenTask(
        input('owner-esc', { era: 'modern', sessionId: null }),
        (s) =>
          new Promise((resolve) => {
            signal = s;
            finish = () =>
              resolve({ kind: 'completed', result: { content: [{ type: 'text', text: 'slow' }] } });
          }),
        { windowMs: 50 },
      );
      expect(slow.kind).toBe('task');
      if (slow.kind !== 'task') return;
      expect(await tasks.get('owner-esc', slow.task.id)).toMatchObject({ status: 'working', era: 'modern' });
      finish?.();
      const r = await tasks.waitForTerminal('owner-esc', slow.task.id, { timeoutMs: 5000 });
      expect(r.kind === 'terminal' && r.task.result).toEqual({ content: [{ type: 'text', text: 'slow' }] });
      expect(signal?.aborted).toBe(false);
    });
  });

  describe('listing', () => {
    it("pages the caller's tasks newest first, stable while new tasks are inserted", async () => {
      const owner = 'owner-list';
      const original: string[] = [];
      for (let i = 0; i < 30; i++)
        original.push(
          (await app.get(TaskCreationService).create(input(owner), { placement: 'here' })).task.id,
        );
      await app.get(TaskCreationService).create(input('someone-else'), { placement: 'here' });
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const [page] = await Promise.all([
          tasks.list(owner, cursor, 7),
          // Concurrent inserts for the same owner while we walk.
          Promise.all([
            app
              .get(TaskCreationService)
              .create(input(owner), { placement: 'here' })
              .then((c) => c.task),
            app
              .get(TaskCreationService)
              .create(input(owner), { placement: 'here' })
              .then((c) => c.task),
          ]),
        ]);
        seen.push(...page.tasks.map((t) => t.id));
        for (const t of page.tasks) expect(t.ownerId).toBe(owner);
        cursor = page.nextCursor;
        pages++;
      } while (cursor && pages < 50);
      expect(new Set(seen).size).toBe(seen.length);
      for (const id of original) expect(seen).toContain(id);
      // Newest first: the originals appear in reverse creation order.
      const order = seen.filter((id) => original.includes(id));
      expect(order).toEqual([...original].reverse());
    });

    it('refuses cursors it did not make', async () => {
      for (const bad of ['nope!', Buffer.from('{"x":1}').toString('base64url'), 'e30']) {
        const e = await caught(tasks.list('owner-list', bad));
        expect(e.code).toBe(TaskErrorCode.INVALID_CURSOR);
      }
    });
  });

  describe('expiry on read', () => {
    it('fails a live task past its ttl as soon as anyone reads it, and wakes waiters', async () => {
      const owner = 'owner-expire';
      const t = (await app.get(TaskCreationService).create(input(owner, { requestedTtlMs: 400 }))).task;
      const run = await exec.run(t.id);
      const t0 = Date.now();
      const r = await tasks.waitForTerminal(owner, t.id, { timeoutMs: 5000 });
      expect(Date.now() - t0).toBeLessThan(2000);
      expect(r.kind === 'terminal' && r.task).toMatchObject({
        status: 'failed',
        statusMessage: 'Task expired',
      });
      await waitFor(() => run.ctx.signal.aborted);
    });
  });

  describe('metrics', () => {
    it('reports live tasks by status from the database', async () => {
      const rows = await withClient(db.url, (c) =>
        c.query(`SELECT count(*)::int AS n FROM task WHERE status = 'working'`),
      );
      expect(await metricValue(app, 'mcp_tasks_active', { status: 'working' })).toBe(rows.rows[0].n);
      expect(
        await metricValue(app, 'mcp_tasks_created_total', { tool: 'slow_tool', mode: 'immediate' }),
      ).toBeGreaterThan(100);
    });
  });

  it('keeps the janitor idle here (JANITOR_ENABLED=false) yet runnable on demand', async () => {
    await sleep(10);
    const r = await app.get(JanitorService).runOnce();
    expect(r.result).toBe('ok');
  });
});
