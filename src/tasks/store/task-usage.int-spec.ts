import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { TaskUsageCounters1765110000000 } from '../../../migrations/1765110000000-task-usage-counters.js';
import { TaskUsageBulkInsert1765120000000 } from '../../../migrations/1765120000000-task-usage-bulk-insert.js';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import { newTaskRow, usageAgainstRows } from '../../../test/support/task-registry.js';
import { ControlledExecutor, sleep } from '../../../test/support/controlled-executor.js';
import { InstancesService } from '../../instances/instances.service.js';
import { JanitorService } from '../../janitor/janitor.service.js';
import { TaskError, TaskErrorCode } from '../tasks.errors.js';
import { TaskCreationRepository, type NewTask } from './task-creation.repository.js';
import { TaskOutcomesRepository } from './task-outcomes.repository.js';
import type { CreationLimits } from './creation-limits.js';
import { TasksService } from '../registry/tasks.service.js';

/**
 * The creation limits read usage counters kept by statement triggers (migration TaskUsageCounters) instead
 * of counting rows. These tests hold the counters to the rows under concurrent writes of every kind.
 */
describe('task usage counters (real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let tasks: TasksService;
  let creations: TaskCreationRepository;
  let outcomes: TaskOutcomesRepository;
  let me: string;

  beforeAll(async () => {
    db = await createTestDatabase('task_usage');
    app = await createTestApp(db.url, { JANITOR_ENABLED: 'false', TASK_EXPIRED_GRACE_MS: '0' }, [], {
      taskWork: new ControlledExecutor(),
    });
    tasks = app.get(TasksService);
    creations = app.get(TaskCreationRepository);
    outcomes = app.get(TaskOutcomesRepository);
    me = app.get(InstancesService).instanceId;
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  const newTask = (ownerId: string, ttlMs = 60000): NewTask => newTaskRow(me, ownerId, ttlMs);
  const roomy: CreationLimits = { maxPerOwner: 1000, maxTotal: 100000, maxRetainedPerOwner: 100000 };

  const compare = (): Promise<{ counters: unknown; rows: unknown }> => usageAgainstRows(db.url);

  it('match the rows after concurrent creates, finishes, cancels, expiries and deletes', async () => {
    const owners = ['u-a', 'u-b', 'u-c'];
    // Every third task of each owner lives 300 ms, to be expired and deleted below.
    const shortLived = (i: number): boolean => (i % 40) % 3 === 0;
    const created = await Promise.all(
      owners.flatMap((o) =>
        Array.from({ length: 40 }, (_, i) =>
          creations.insertWithLimits(newTask(o, shortLived(i) ? 300 : 60000), roomy),
        ),
      ),
    );
    let r = await compare();
    expect(r.counters).toEqual(r.rows);

    // Finishes and cancels at once, many transactions touching the same counter rows.
    await Promise.all(
      created.map((t, i) => {
        const fence = { taskId: t.id, generation: t.generation, instanceId: me };
        if (i % 3 === 1) return outcomes.completeIfCurrent(fence, { content: [] });
        // Not a short-lived one: on a loaded machine its 300 ms may be over by now, and a cancel of an
        // expired task is refused (it is failed), which is not what this wave is about.
        if (i % 3 === 2 && i % 2 === 0 && !shortLived(i)) return tasks.cancel(t.ownerId, t.id);
        return Promise.resolve(null);
      }),
    );
    r = await compare();
    expect(r.counters).toEqual(r.rows);

    // The short-ttl third expires (janitor, batch UPDATE) and, with no grace, is deleted (batch DELETE),
    // alongside more creations and cancels in parallel.
    await sleep(400);
    await Promise.all([
      app.get(JanitorService).runOnce(),
      ...owners.map((o) => creations.insertWithLimits(newTask(o), roomy)),
      ...created.filter((_, i) => i % 3 === 2).map((t) => tasks.cancel(t.ownerId, t.id).catch(() => null)),
    ]);
    await app.get(JanitorService).runOnce();
    r = await compare();
    expect(r.counters).toEqual(r.rows);
    expect((r.rows as { total: number }).total).toBeGreaterThan(0);
  });

  it('the retained limit counts finished tasks and frees a slot when one is deleted', async () => {
    const owner = 'u-retained';
    const limits: CreationLimits = { maxPerOwner: 10, maxTotal: 100000, maxRetainedPerOwner: 3 };
    const done: { id: string }[] = [];
    for (let i = 0; i < 3; i++) {
      const t = await creations.insertWithLimits(newTask(owner), limits);
      await tasks.cancel(owner, t.id);
      done.push(t);
    }
    const refused = await creations.insertWithLimits(newTask(owner), limits).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(TaskError);
    expect((refused as TaskError).code).toBe(TaskErrorCode.LIMIT_EXCEEDED);
    expect((refused as TaskError).message).toContain('QUOTA_RETAINED_TASKS_PER_OWNER = 3');
    await withClient(db.url, (c) => c.query('DELETE FROM task WHERE id = $1', [done[0].id]));
    await expect(creations.insertWithLimits(newTask(owner), limits)).resolves.toMatchObject({
      status: 'working',
    });
  });

  it('60 parallel creates against a total of 25 live tasks leave exactly 25 more', async () => {
    const before = (await compare()).rows as { total: number };
    const limits: CreationLimits = {
      maxPerOwner: 1000,
      maxTotal: before.total + 25,
      maxRetainedPerOwner: 1000,
    };
    const results = await Promise.allSettled(
      Array.from({ length: 60 }, (_, i) => creations.insertWithLimits(newTask(`u-total-${i % 7}`), limits)),
    );
    expect(results.filter((x) => x.status === 'fulfilled')).toHaveLength(25);
    for (const x of results) {
      if (x.status === 'rejected') expect((x.reason as TaskError).message).toContain('TASK_MAX_TOTAL');
    }
    const after = await compare();
    expect(after.counters).toEqual(after.rows);
    expect((after.rows as { total: number }).total).toBe(before.total + 25);
  });

  it('the migration counts the rows already there (down, rows written meanwhile, up)', async () => {
    const migration = new TaskUsageCounters1765110000000();
    const bulkInsert = new TaskUsageBulkInsert1765120000000();
    const runner = app.get(DataSource).createQueryRunner();
    try {
      await runner.startTransaction();
      await bulkInsert.down(runner);
      await migration.down(runner);
      await runner.query(
        `INSERT INTO task (id, owner_id, era, tool_name, status, created_at, last_updated_at, ttl_ms, expires_at,
                           poll_interval_ms, request_params)
         SELECT 'pre-' || g, 'u-pre-' || (g % 3), 'modern', 't', CASE WHEN g % 2 = 0 THEN 'working' ELSE 'failed' END,
                now(), now(), 60000, now() + interval '1 minute', 1000, '{}'
           FROM generate_series(1, 90) g`,
      );
      await migration.up(runner);
      await bulkInsert.up(runner);
      await runner.commitTransaction();
    } catch (err) {
      await runner.rollbackTransaction();
      throw err;
    } finally {
      await runner.release();
    }
    const r = await compare();
    expect(r.counters).toEqual(r.rows);
  });
});
