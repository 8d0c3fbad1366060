import { recordCommitGroups, type CommitGroupRecord } from '../../../test/support/task-registry.js';
import type pg from 'pg';
import type { INestApplication } from '@nestjs/common';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import { newTaskRow, usageAgainstRows } from '../../../test/support/task-registry.js';
import { ControlledExecutor, sleep, waitFor } from '../../../test/support/controlled-executor.js';
import { InstancesService } from '../../instances/instances.service.js';
import { JanitorService } from '../../janitor/janitor.service.js';
import { TaskRunnerService } from '../execution/task-runner.service.js';
import { newTaskId } from '../task-ids.js';
import { TaskError, TaskErrorCode } from '../tasks.errors.js';
import { TasksRepository } from './tasks.repository.js';
import { TaskCreationRepository, type NewTask } from './task-creation.repository.js';
import { TaskOutcomesRepository } from './task-outcomes.repository.js';
import type { CreationLimits } from './creation-limits.js';
import { TasksService } from '../registry/tasks.service.js';
import { TaskCreationService } from '../execution/task-creation.service.js';
import type { TaskSnapshot } from '../task.types.js';
import { TaskCommitGroups } from './task-commit-groups.js';

/**
 * Group commit of creations and worker outcomes (TaskCreationRepository.insertGroup,
 * TaskOutcomesRepository.finishGroup), against the real PostgreSQL: writes that arrive together share a transaction, yet each caller gets exactly the answer
 * it would have got alone, the limits stay exact, and the usage counters stay equal to the rows.
 */
describe('commit groups (real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let tasks: TasksService;
  let repo: TasksRepository;
  let creations: TaskCreationRepository;
  let outcomes: TaskOutcomesRepository;
  let executor: ControlledExecutor;
  let me: string;
  const groups: CommitGroupRecord[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('commit_group');
    executor = new ControlledExecutor();
    app = await createTestApp(
      db.url,
      { JANITOR_ENABLED: 'false', TASK_EXPIRED_GRACE_MS: '0', DB_POOL_MAX: '12' },
      [],
      { taskWork: executor },
    );
    tasks = app.get(TasksService);
    repo = app.get(TasksRepository);
    creations = app.get(TaskCreationRepository);
    outcomes = app.get(TaskOutcomesRepository);
    me = app.get(InstancesService).instanceId;
    recordCommitGroups(groups, app.get(TaskCommitGroups));
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });
  beforeEach(() => {
    groups.length = 0;
  });

  const newTask = (ownerId: string, ttlMs = 60000): NewTask => newTaskRow(me, ownerId, ttlMs, { n: 1 });
  const roomy: CreationLimits = { maxPerOwner: 100000, maxTotal: 1000000, maxRetainedPerOwner: 1000000 };

  const counted = (): Promise<{ counters: unknown; rows: unknown }> => usageAgainstRows(db.url);

  async function liveOf(owner: string): Promise<number> {
    return withClient(db.url, async (c) => {
      const r = await c.query(
        `SELECT count(*)::int AS n FROM task WHERE owner_id = $1 AND status IN ('working', 'input_required')`,
        [owner],
      );
      return r.rows[0].n as number;
    });
  }

  it('commits parallel creations in groups, each row counted once', async () => {
    const owners = ['g-a', 'g-b', 'g-c'];
    const created = await Promise.all(
      Array.from({ length: 60 }, (_, i) => creations.insertWithLimits(newTask(owners[i % 3]), roomy)),
    );
    expect(new Set(created.map((t) => t.id)).size).toBe(60);
    for (const t of created) expect(t).toMatchObject({ status: 'working', generation: 1, instanceId: me });
    const creates = groups.filter((g) => g.kind === 'create');
    expect(creates.reduce((n, g) => n + g.size, 0)).toBe(60);
    // Without group commit every creation is its own transaction: 60 groups of one.
    expect(creates.length).toBeLessThan(60);
    expect(Math.max(...creates.map((g) => g.size))).toBeGreaterThan(1);
    expect(creates.some((g) => g.fellBack)).toBe(false);
    const r = await counted();
    expect(r.counters).toEqual(r.rows);
  });

  it('150 parallel creations against an owner limit of 100: exactly 100, the rest refused by that limit', async () => {
    const owner = 'g-limited';
    const limits: CreationLimits = { maxPerOwner: 100, maxTotal: 1000000, maxRetainedPerOwner: 1000000 };
    const results = await Promise.allSettled(
      Array.from({ length: 150 }, () => creations.insertWithLimits(newTask(owner), limits)),
    );
    expect(results.filter((x) => x.status === 'fulfilled')).toHaveLength(100);
    for (const x of results) {
      if (x.status === 'rejected') {
        expect(x.reason).toBeInstanceOf(TaskError);
        expect((x.reason as TaskError).code).toBe(TaskErrorCode.LIMIT_EXCEEDED);
        expect((x.reason as TaskError).message).toContain('TASK_MAX_PER_OWNER = 100');
      }
    }
    expect(await liveOf(owner)).toBe(100);
    // Some group met the limit and handed its creations back to run one by one.
    expect(groups.some((g) => g.kind === 'create' && g.fellBack)).toBe(true);
    const r = await counted();
    expect(r.counters).toEqual(r.rows);
  });

  it('counts a bulk insert by its statement (before commit, in key order), a single insert at commit', async () => {
    await withClient(db.url, async (c) => {
      const usage = async (owner: string): Promise<number> =>
        (
          await c.query(`SELECT coalesce(sum(live), 0)::int AS n FROM task_usage WHERE owner_id = $1`, [
            owner,
          ])
        ).rows[0].n as number;
      const insert = (owner: string, n: number): Promise<unknown> =>
        c.query(
          `INSERT INTO task (id, owner_id, era, tool_name, status, created_at, last_updated_at, ttl_ms,
                             expires_at, poll_interval_ms, request_params)
           SELECT $1 || g, $1, 'modern', 't', 'working', now(), now(), 60000, now() + interval '1 minute',
                  1000, '{}'
             FROM generate_series(1, $2::int) g`,
          [owner, n],
        );
      await c.query('BEGIN');
      await c.query(`SET LOCAL mcp.task_bulk = 'on'`);
      await insert('g-bulk-', 5);
      expect(await usage('g-bulk-')).toBe(5);
      await c.query('COMMIT');
      await c.query('BEGIN');
      await insert('g-single-', 3);
      expect(await usage('g-single-')).toBe(0);
      await c.query('COMMIT');
      expect(await usage('g-single-')).toBe(3);
      expect(await usage('g-bulk-')).toBe(5);
    });
    const r = await counted();
    expect(r.counters).toEqual(r.rows);
  });

  it('commits parallel outcomes in groups; a cancelled or expired one gets its own refusal', async () => {
    const owner = 'g-finish';
    const created = await Promise.all(
      Array.from({ length: 40 }, () => creations.insertWithLimits(newTask(owner), roomy)),
    );
    const short = await creations.insertWithLimits(newTask(owner, 200), roomy);
    const cancelled = created.slice(0, 4);
    for (const t of cancelled) await tasks.cancel(owner, t.id);
    await sleep(300); // `short` is now past its ttl (not swept: the janitor is off)
    groups.length = 0;
    const all = [...created, short];
    const results = await Promise.all(
      all.map((t) =>
        outcomes.completeIfCurrent({ taskId: t.id, generation: t.generation, instanceId: me }, { n: t.id }),
      ),
    );
    results.forEach((r, i) => {
      const t = all[i];
      if (cancelled.includes(t)) {
        expect(r).toMatchObject({ applied: false, reason: 'not_current' });
        expect(r.task?.status).toBe('cancelled');
      } else if (t === short) {
        expect(r).toMatchObject({ applied: false, reason: 'expired' });
        expect(r.task).toMatchObject({ status: 'failed', statusMessage: 'Task expired' });
      } else {
        expect(r).toMatchObject({ applied: true, previous: 'working' });
        expect(r.task).toMatchObject({ status: 'completed', result: { n: t.id }, instanceId: null });
      }
    });
    const finishes = groups.filter((g) => g.kind === 'finish');
    expect(finishes.reduce((n, g) => n + g.size, 0)).toBe(all.length);
    expect(Math.max(...finishes.map((g) => g.size))).toBeGreaterThan(1);
    // A late second outcome changes nothing: terminal stays terminal.
    const again = await outcomes.failIfCurrent(
      { taskId: created[10].id, generation: 1, instanceId: me },
      { code: -1, message: 'late' },
    );
    expect(again).toMatchObject({ applied: false, reason: 'not_current' });
    expect(await tasks.get(owner, created[10].id)).toMatchObject({ status: 'completed' });
    const r = await counted();
    expect(r.counters).toEqual(r.rows);
  });

  it('groups, single writes, cancels and the janitor together: no deadlock, no drift', async () => {
    const owners = ['g-mix-a', 'g-mix-b', 'g-mix-c', 'g-mix-d'];
    const errors: unknown[] = [];
    const stopAt = Date.now() + 2500;
    const worker = async (w: number): Promise<void> => {
      for (let i = 0; Date.now() < stopAt; i++) {
        const owner = owners[(w + i) % owners.length];
        const t = await creations.insertWithLimits(newTask(owner, i % 4 === 0 ? 150 : 60000), roomy);
        const fence = { taskId: t.id, generation: t.generation, instanceId: me };
        if (i % 5 === 1) await tasks.cancel(owner, t.id);
        if (i % 3 !== 2) {
          const r = await outcomes.completeIfCurrent(fence, { i });
          if (r.applied) expect(r.task.status).toBe('completed');
        }
      }
    };
    const janitor = async (): Promise<void> => {
      while (Date.now() < stopAt) {
        await app.get(JanitorService).runOnce();
        await sleep(100);
      }
    };
    await Promise.all([
      ...Array.from({ length: 16 }, (_, w) => worker(w).catch((e: unknown) => void errors.push(e))),
      janitor().catch((e: unknown) => void errors.push(e)),
    ]);
    expect(errors).toEqual([]);
    expect(groups.some((g) => g.size > 1)).toBe(true);
    await sleep(200);
    await app.get(JanitorService).runOnce();
    const r = await counted();
    expect(r.counters).toEqual(r.rows);
  });

  it('a single write counts before it appends its outbox row, as bulk and grouped writes do: they never deadlock', async () => {
    const owner = 'g-order';
    const session = `g-order-session-${newTaskId()}`;
    // Legacy tasks of one session: each change appends to that session's GET stream (one row lock).
    const made = await Promise.all(
      Array.from({ length: 80 }, () =>
        creations.insertWithLimits({ ...newTask(owner), era: 'legacy', sessionId: session }, roomy),
      ),
    );
    const stripes = await withClient(db.url, (c) =>
      c.query<{ id: string; s: number }>(
        'SELECT id, abs(hashtext(id)) % 64 AS s FROM task WHERE id = ANY($1::text[]) ORDER BY s, id',
        [made.map((t) => t.id)],
      ),
    );
    const pair = stripes.rows.find((r, i) => stripes.rows[i + 1]?.s === r.s);
    if (!pair) throw new Error('80 tasks over 64 stripes always share one');
    const [a, b] = [pair.id, stripes.rows[stripes.rows.indexOf(pair) + 1].id];
    await withClient(db.url, async (g) => {
      // A bulk write (a janitor batch, a commit group): its statement takes the counter rows of (owner,
      // stripe), then, later in its transaction, the session's stream row.
      await g.query('BEGIN');
      await g.query(`SET LOCAL mcp.task_bulk = 'on'`);
      await g.query(`UPDATE task SET status = 'failed', status_message = 'bulk' WHERE id = $1`, [b]);
      // A single write of another task on the same stripe, in the same session, meanwhile.
      const cancel = tasks.cancel(owner, a).then(
        () => 'ok',
        (e: { code?: string; message?: string }) => e.code ?? e.message,
      );
      await sleep(300);
      const append = await g
        .query(
          `INSERT INTO mcp_sse_stream (session_id, stream_id, last_seq) VALUES ($1, 'g', 0)
           ON CONFLICT (session_id, stream_id) DO UPDATE SET last_seq = mcp_sse_stream.last_seq + 1`,
          [session],
        )
        .then(
          () => 'ok',
          (e: { code?: string }) => e.code,
        );
      await g.query(append === 'ok' ? 'COMMIT' : 'ROLLBACK');
      // Had the cancel appended its outbox row before counting (at COMMIT), each would hold what the other
      // waits for, and PostgreSQL would abort one of them (40P01).
      expect({ append, cancel: await cancel }).toEqual({ append: 'ok', cancel: 'ok' });
    });
    const r = await counted();
    expect(r.counters).toEqual(r.rows);
  });

  it('one locked row does not hold up the other outcomes of its group', async () => {
    const owner = 'g-busy';
    const made = await Promise.all(
      Array.from({ length: 12 }, () => creations.insertWithLimits(newTask(owner), roomy)),
    );
    const busy = made[5];
    await withClient(db.url, async (c) => {
      // Another transaction holds one task's row (TASK_LOCK_TIMEOUT_MS is 5 s here).
      await c.query('BEGIN');
      await c.query('SELECT 1 FROM task WHERE id = $1 FOR UPDATE', [busy.id]);
      groups.length = 0;
      const settled = new Set<string>();
      const results = made.map((t) =>
        outcomes
          .completeIfCurrent({ taskId: t.id, generation: t.generation, instanceId: me }, { n: t.id })
          .then((r) => {
            settled.add(t.id);
            return r;
          }),
      );
      // The eleven others commit while the row is still locked, not after the lock wait of their group.
      await waitFor(() => settled.size === 11 || undefined, 2500);
      expect(settled.has(busy.id)).toBe(false);
      expect(groups.some((g) => g.kind === 'finish' && g.size > 1 && !g.fellBack)).toBe(true);
      await c.query('COMMIT');
      for (const r of await Promise.all(results)) {
        expect(r).toMatchObject({ applied: true, task: { status: 'completed' } });
      }
    });
    const r = await counted();
    expect(r.counters).toEqual(r.rows);
  });

  /**
   * Starts a task for `owner` whose run returns at once, holds its outcome commit behind a row lock taken
   * on connection `c`, and counts the registry's owner-scoped reads (they still run; nothing is stubbed)
   * while `body` runs. `body` decides when the lock's transaction commits.
   */
  async function withOutcomeCommitting(
    owner: string,
    body: (c: pg.Client, task: TaskSnapshot, readers: string[]) => Promise<void>,
  ): Promise<TaskSnapshot> {
    const task = (
      await app.get(TaskCreationService).create({
        ownerId: owner,
        era: 'legacy',
        toolName: 't',
        requestParams: {},
        mode: 'immediate',
      })
    ).task;
    const run = await executor.run(task.id);
    await withClient(db.url, async (c) => {
      await c.query('BEGIN');
      await c.query('SELECT 1 FROM task WHERE id = $1 FOR UPDATE', [task.id]);
      run.complete({ content: [{ type: 'text', text: 'finished' }] });
      await waitFor(() => app.get(TaskRunnerService).outcomeInFlight(task.id, owner) !== undefined);
      const readers: string[] = [];
      const findOwnedClocked = repo.findOwnedClocked.bind(repo);
      repo.findOwnedClocked = (ownerId, id) => {
        readers.push(ownerId);
        return findOwnedClocked(ownerId, id);
      };
      try {
        await body(c, task, readers);
      } finally {
        Reflect.deleteProperty(repo, 'findOwnedClocked');
      }
    });
    return task;
  }

  it("someone else's read of a task whose outcome is committing does not wait for that commit", async () => {
    const owner = 'g-pending-owner';
    const task = await withOutcomeCommitting(owner, async (c, task, readers) => {
      const timed = async (id: string): Promise<{ ms: number; err: unknown }> => {
        const started = performance.now();
        const pending = tasks.get('g-stranger', id).catch((e: unknown) => e);
        // Straight to the database, as for any id that is not the caller's: no wait comes first.
        expect(readers.splice(0)).toEqual(['g-stranger']);
        const err = await pending;
        return { ms: performance.now() - started, err };
      };
      const foreign = await timed(task.id);
      const random = await timed(newTaskId());
      for (const r of [foreign, random]) {
        expect(r.err).toBeInstanceOf(TaskError);
        expect((r.err as TaskError).code).toBe(TaskErrorCode.TASK_NOT_FOUND);
      }
      console.log(
        `tasks/get by a stranger: ${foreign.ms.toFixed(1)} ms for an id whose outcome is committing, ` +
          `${random.ms.toFixed(1)} ms for a random id`,
      );
      await c.query('COMMIT');
    });
    expect(await tasks.get(owner, task.id)).toMatchObject({ status: 'completed' });
  });

  it('a read of a task whose run here has returned answers its outcome, not "working"', async () => {
    const owner = 'g-read';
    // The outcome write waits behind a row lock, as a slow commit would; the read itself never waits on locks.
    const task = await withOutcomeCommitting(owner, async (c, task, readers) => {
      const read = tasks.get(owner, task.id);
      const foreign = tasks.get('g-someone-else', task.id).catch((e: unknown) => e);
      await sleep(40);
      await c.query('COMMIT');
      expect(await read).toMatchObject({
        status: 'completed',
        result: { content: [{ text: 'finished' }] },
      });
      // ...and anyone else still reads the database, where the task is not theirs.
      const refused = await foreign;
      expect(refused).toBeInstanceOf(TaskError);
      expect((refused as TaskError).code).toBe(TaskErrorCode.TASK_NOT_FOUND);
      expect(readers).toContain('g-someone-else');
      // The owner was answered from the write this instance committed, not by reading it back.
      expect(readers.filter((o) => o === owner)).toHaveLength(0);
    });
    // Later reads come from the finished-task cache with the same answer.
    expect(await tasks.get(owner, task.id)).toMatchObject({ status: 'completed' });
  });
});
