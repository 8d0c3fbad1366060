import { recordCommitGroups, type CommitGroupRecord } from '../../../test/support/task-registry.js';
import type { INestApplication } from '@nestjs/common';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import { newTaskRow, usageAgainstRows } from '../../../test/support/task-registry.js';
import { ControlledExecutor } from '../../../test/support/controlled-executor.js';
import { PgProxy } from '../../../test/support/pg-proxy.js';
import { InstancesService } from '../../instances/instances.service.js';
import { TaskCreationRepository, type NewTask } from './task-creation.repository.js';
import { TaskOutcomesRepository } from './task-outcomes.repository.js';
import type { CreationLimits } from './creation-limits.js';
import { TaskCommitGroups } from './task-commit-groups.js';

/**
 * A COMMIT that PostgreSQL carries out but whose answer never reaches the server (the connection drops in
 * between, cut by a proxy at exactly that step): the writes landed, and every caller must learn so, for
 * groups and for single writes alike.
 */
describe('commits whose answer is lost (real PostgreSQL through a proxy)', () => {
  let db: TestDatabase;
  let proxy: PgProxy;
  let app: INestApplication;
  let creations: TaskCreationRepository;
  let outcomes: TaskOutcomesRepository;
  let me: string;
  const groups: CommitGroupRecord[] = [];
  const roomy: CreationLimits = { maxPerOwner: 100000, maxTotal: 1000000, maxRetainedPerOwner: 1000000 };

  beforeAll(async () => {
    db = await createTestDatabase('commit_lost');
    proxy = await PgProxy.start(db.url);
    app = await createTestApp(proxy.via(db.url), { JANITOR_ENABLED: 'false', DB_POOL_MAX: '12' }, [], {
      taskWork: new ControlledExecutor(),
    });
    creations = app.get(TaskCreationRepository);
    outcomes = app.get(TaskOutcomesRepository);
    me = app.get(InstancesService).instanceId;
    recordCommitGroups(groups, app.get(TaskCommitGroups));
  });
  afterAll(async () => {
    await app.close();
    await proxy.close();
    await db.drop();
  });
  beforeEach(() => {
    groups.length = 0;
  });

  const newTask = (ownerId: string): NewTask => newTaskRow(me, ownerId, 60000, { n: 1 });
  /** The COMMIT that carries the change notifications of at least `n` of these tasks. */
  const commitOf = (tasks: Array<{ id: string }>, n: number) => (sql: string) =>
    tasks.filter((t) => sql.includes(t.id)).length >= n;
  const rowsOf = (ids: string[]) =>
    withClient(
      db.url,
      async (c) =>
        (await c.query('SELECT id, status, result FROM task WHERE id = ANY($1::text[]) ORDER BY id', [ids]))
          .rows,
    );

  it('a creation group committed unheard: every caller gets its task, none is left an orphan', async () => {
    const made = Array.from({ length: 5 }, () => newTask('lost-create-group'));
    const lost = proxy.loseCommitReply(commitOf(made, 5));
    const results = await Promise.allSettled(made.map((t) => creations.insertWithLimits(t, roomy)));
    await lost;
    expect(groups).toContainEqual({ kind: 'create', size: 5, fellBack: true });
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value.id : String(r.reason)))).toEqual(
      made.map((t) => t.id),
    );
    expect(await rowsOf(made.map((t) => t.id))).toHaveLength(5);
    const r = await usageAgainstRows(db.url);
    expect(r.counters).toEqual(r.rows);
  });

  it('a single creation committed unheard: its caller gets the task', async () => {
    const t = newTask('lost-create-one');
    const lost = proxy.loseCommitReply(commitOf([t], 1));
    const created = await creations.insertWithLimits(t, roomy);
    await lost;
    expect(created).toMatchObject({ id: t.id, status: 'working', instanceId: me });
    expect(await rowsOf([t.id])).toEqual([{ id: t.id, status: 'working', result: null }]);
  });

  it('an outcome group committed unheard: every outcome is answered as applied, not "not current"', async () => {
    const made = await Promise.all(
      Array.from({ length: 5 }, () => creations.insertWithLimits(newTask('lost-finish-group'), roomy)),
    );
    groups.length = 0;
    const lost = proxy.loseCommitReply(commitOf(made, 5));
    const results = await Promise.all(
      made.map((t) =>
        outcomes.completeIfCurrent({ taskId: t.id, generation: t.generation, instanceId: me }, { n: t.id }),
      ),
    );
    await lost;
    expect(groups).toContainEqual({ kind: 'finish', size: 5, fellBack: true });
    results.forEach((r, i) => {
      expect(r).toMatchObject({ applied: true, task: { id: made[i].id, status: 'completed' } });
      expect(r.applied && r.expiry && r.expiry.msUntilExpiry > 0).toBe(true);
    });
    for (const row of await rowsOf(made.map((t) => t.id))) {
      expect(row).toEqual({ id: row.id, status: 'completed', result: { n: row.id } });
    }
  });

  it('a single outcome committed unheard is answered as applied; a different outcome is still refused', async () => {
    const t = await creations.insertWithLimits(newTask('lost-finish-one'), roomy);
    const fence = { taskId: t.id, generation: t.generation, instanceId: me };
    const lost = proxy.loseCommitReply(commitOf([t], 1));
    const r = await outcomes.failIfCurrent(fence, { code: -32000, message: 'tool said no' });
    await lost;
    expect(r).toMatchObject({
      applied: true,
      task: { status: 'failed', error: { message: 'tool said no' } },
    });
    // Only the very outcome that landed counts as this write's: another one is late, as before.
    const late = await outcomes.failIfCurrent(fence, { code: -32000, message: 'something else' });
    expect(late).toMatchObject({ applied: false, reason: 'not_current' });
  });
});
