import type { INestApplication } from '@nestjs/common';
import pg from 'pg';
import { AdvisoryLockKey } from '../../database/advisory-locks.js';
import { InstancesService } from '../../instances/instances.service.js';
import { ControlledExecutor, waitFor } from '../../../test/support/controlled-executor.js';
import { legacyTaskInput } from '../../../test/support/task-registry.js';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.js';
import { TaskClaimer } from './task-claimer.service.js';
import { QUEUED_MESSAGE } from '../task-queue.js';
import type { TaskSnapshot } from '../task.types.js';
import { TasksService } from '../registry/tasks.service.js';
import { TaskCreationService } from '../execution/task-creation.service.js';

const OWNER = 'o-slot-write';
const PRINCIPAL = { id: OWNER, provider: 'proxy', subject: 'alice', scopes: [], groups: [] };

/**
 * A slot bounds the tool work running at once, not the bookkeeping after it. A run that held its slot until
 * its outcome committed made every short task's slot wait for a database round trip under load: with the
 * default 16 slots, 32 clients of an instant task ran a third as fast as with 64, most tasks going through
 * the queue. The outcome writes are held here by a real row lock (another transaction's SELECT … FOR
 * UPDATE on the task), so "the work has returned, its write has not landed" lasts as long as the test
 * wants, on one slot (TASK_WORKER_CONCURRENCY=1).
 */
describe('worker slots while outcomes are written (real PostgreSQL, row locks)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let exec: ControlledExecutor;
  let tasks: TasksService;
  const lockers: pg.Client[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('task_slots_outcome_write');
    exec = new ControlledExecutor();
    app = await createTestApp(
      db.url,
      // One slot; a blocked write waits for its lock, not retried around a short lock_timeout.
      {
        JANITOR_ENABLED: 'false',
        TASK_WORKER_CONCURRENCY: '1',
        TASK_LOCK_TIMEOUT_MS: '60000',
        TASK_CLAIM_POLL_MS: '600000',
      },
      [],
      { taskWork: exec },
    );
    tasks = app.get(TasksService);
  });
  afterAll(async () => {
    for (const c of lockers) await c.end().catch(() => undefined);
    await app?.close();
    await db?.drop();
  });

  /** Holds the task's row lock in a transaction of its own until `release()`. */
  async function lockRow(taskId: string): Promise<{ release(): Promise<void> }> {
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    lockers.push(c);
    await c.query('BEGIN');
    await c.query('SELECT 1 FROM task WHERE id = $1 FOR UPDATE', [taskId]);
    return {
      release: async () => {
        await c.query('COMMIT');
        await c.end();
      },
    };
  }

  /** Sessions of the server's pool waiting for a row lock (the blocked outcome writes). */
  async function lockWaiters(): Promise<number> {
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      const r = await c.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      return r.rows[0].n;
    } finally {
      await c.end();
    }
  }

  const start = (): Promise<TaskSnapshot> =>
    app
      .get(TaskCreationService)
      .create(legacyTaskInput(OWNER, { principal: PRINCIPAL }))
      .then((c) => c.task);

  async function status(taskId: string): Promise<string> {
    return (await tasks.get(OWNER, taskId)).status;
  }

  it('a run whose work returned gives its slot to the next task while its outcome write waits', async () => {
    const a = await start();
    expect(a.instanceId).not.toBeNull();
    const runA = await exec.run(a.id);
    const lockA = await lockRow(a.id);
    runA.complete();
    await waitFor(async () => (await lockWaiters()) === 1);

    // A's write is blocked: the one slot is free all the same, so B is leased here and runs now.
    expect(app.get(TaskClaimer).slots()).toEqual({ busy: 0, free: 1 });
    const b = await start();
    expect(b.instanceId).not.toBeNull();
    expect(b.statusMessage).not.toBe(QUEUED_MESSAGE);
    (await exec.run(b.id)).complete();
    const doneB = await tasks.waitForTerminal(OWNER, b.id, { timeoutMs: 10000 });
    expect(doneB.kind === 'terminal' && doneB.task.status).toBe('completed');
    expect(await status(a.id)).toBe('working');

    await lockA.release();
    const doneA = await tasks.waitForTerminal(OWNER, a.id, { timeoutMs: 10000 });
    expect(doneA.kind === 'terminal' && doneA.task.status).toBe('completed');
  });

  it('writes pending beyond as many as there are slots hold a slot again, and the queue waits for them', async () => {
    await waitFor(() => app.get(TaskClaimer).slots().busy === 0);
    // A's write blocked: 1 write pending on 1 slot, still free.
    const a = await start();
    const runA = await exec.run(a.id);
    const lockA = await lockRow(a.id);
    runA.complete();
    await waitFor(async () => (await lockWaiters()) === 1);
    // B's write blocked too: 2 pending on 1 slot, so the slot is taken.
    const b = await start();
    expect(b.instanceId).not.toBeNull();
    const runB = await exec.run(b.id);
    const lockB = await lockRow(b.id);
    runB.complete();
    await waitFor(async () => (await lockWaiters()) === 2);
    expect(app.get(TaskClaimer).slots()).toEqual({ busy: 1, free: 0 });

    // C finds no slot: queued for any instance with one.
    const c = await start();
    expect(c).toMatchObject({ instanceId: null, statusMessage: QUEUED_MESSAGE });
    expect(exec.runs.some((r) => r.task.id === c.id)).toBe(false);

    // A's write lands: a slot is free again and C is claimed and run at once (no poll: its timer is minutes).
    await lockA.release();
    const runC = await exec.run(c.id, 0, 10000);
    runC.complete();
    const doneC = await tasks.waitForTerminal(OWNER, c.id, { timeoutMs: 10000 });
    expect(doneC.kind === 'terminal' && doneC.task.status).toBe('completed');
    await lockB.release();
    const doneB = await tasks.waitForTerminal(OWNER, b.id, { timeoutMs: 10000 });
    expect(doneB.kind === 'terminal' && doneB.task.status).toBe('completed');
  });
});

/**
 * A creation is leased to its instance (a slot reserved for it) when its write is sent, not when it starts
 * waiting for its commit group: under load a creation waits about one group's commit for its turn, and the
 * slots reserved by the creations in line ran no work while queueing the rest of a burst. The creation
 * groups are held here by the creation advisory lock, taken by another session.
 */
describe('worker slots of creations waiting for their commit group (real PostgreSQL, advisory lock)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let exec: ControlledExecutor;
  let tasks: TasksService;

  beforeAll(async () => {
    db = await createTestDatabase('task_slots_creation_wait');
    exec = new ControlledExecutor();
    app = await createTestApp(
      db.url,
      {
        JANITOR_ENABLED: 'false',
        TASK_WORKER_CONCURRENCY: '2',
        TASK_LOCK_TIMEOUT_MS: '60000',
        TASK_CLAIM_POLL_MS: '600000',
      },
      [],
      { taskWork: exec },
    );
    tasks = app.get(TasksService);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const start = (): Promise<TaskSnapshot> =>
    app
      .get(TaskCreationService)
      .create(legacyTaskInput(OWNER, { principal: PRINCIPAL }))
      .then((c) => c.task);

  it('a creation in line behind another group takes the slot that is free when its own write goes', async () => {
    const here = app.get(InstancesService).instanceId;
    const claimer = app.get(TaskClaimer);
    const r = await start();
    const runR = await exec.run(r.id);
    expect(claimer.slots()).toEqual({ busy: 1, free: 1 });

    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    try {
      await locker.query('SELECT pg_advisory_lock($1)', [AdvisoryLockKey.TaskCreation]);
      // A's group is sent (A leased here: both slots taken) and waits for the creation lock.
      const pendingA = start();
      await waitFor(async () => {
        const w = await locker.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event = 'advisory'`,
        );
        return w.rows[0].n === 1;
      });
      expect(claimer.slots()).toEqual({ busy: 2, free: 0 });
      // B waits for A's group to commit: it has not been placed yet, so it holds no slot.
      const pendingB = start();
      // R's work returns: its slot is free by the time B's write goes.
      runR.complete();
      await waitFor(() => claimer.slots().busy === 1);
      await locker.query('SELECT pg_advisory_unlock($1)', [AdvisoryLockKey.TaskCreation]);
      const [a, b] = await Promise.all([pendingA, pendingB]);
      expect(a.instanceId).toBe(here);
      expect(b.instanceId).toBe(here);
      expect(b.statusMessage).not.toBe(QUEUED_MESSAGE);
      (await exec.run(a.id)).complete();
      (await exec.run(b.id)).complete();
      for (const t of [r, a, b]) {
        const done = await tasks.waitForTerminal(OWNER, t.id, { timeoutMs: 10000 });
        expect(done.kind === 'terminal' && done.task.status).toBe('completed');
      }
    } finally {
      await locker.end();
    }
  });
});
