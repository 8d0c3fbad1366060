import type { INestApplication } from '@nestjs/common';
import { ControlledExecutor, sleep, waitFor } from '../../../test/support/controlled-executor.js';
import { PgProxy } from '../../../test/support/pg-proxy.js';
import { legacyTaskInput } from '../../../test/support/task-registry.js';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import { InstancesService } from '../../instances/instances.service.js';
import { LifecycleService } from '../../lifecycle/lifecycle.service.js';
import { TaskClaimer } from './task-claimer.service.js';
import { QUEUED_MESSAGE } from '../task-queue.js';
import { TasksService } from '../registry/tasks.service.js';
import { TaskCreationService } from '../execution/task-creation.service.js';
import { UnresolvedLeases } from './unresolved-leases.js';

const PRINCIPAL = { id: 'o-unresolved', provider: 'proxy', subject: 'alice', scopes: [], groups: [] };

/**
 * A claim, or a creation placed on this instance, whose COMMIT reaches PostgreSQL but whose answer is lost
 * while PostgreSQL then stays out of reach (the proxy cuts every connection and refuses new ones): the
 * write's caller cannot learn that it landed, and its tasks are leased here with no run. Once PostgreSQL
 * answers again they must be run here, or given back to the queue without a charged attempt, never left for
 * their lease to lapse (the janitor's "worker lost").
 */
describe('leases of a write whose COMMIT answer was lost (real PostgreSQL through a proxy)', () => {
  let db: TestDatabase;
  let proxy: PgProxy;
  /** Creates queued tasks, straight on the database (its claimer never runs). */
  let web: INestApplication;
  /** Runs work, through the proxy. */
  let worker: INestApplication;
  let exec: ControlledExecutor;
  let me: string;

  beforeAll(async () => {
    db = await createTestDatabase('unresolved_leases');
    proxy = await PgProxy.start(db.url);
    exec = new ControlledExecutor();
    web = await createTestApp(db.url, { JANITOR_ENABLED: 'false', INSTANCE_ROLE: 'web' });
    worker = await createTestApp(
      proxy.via(db.url),
      { JANITOR_ENABLED: 'false', TASK_WORKER_CONCURRENCY: '1', TASK_CLAIM_POLL_MS: '600000' },
      [],
      { taskWork: exec },
    );
    me = worker.get(InstancesService).instanceId;
  });
  afterAll(async () => {
    proxy?.refuse(undefined);
    await Promise.all([web?.close(), worker?.close()]);
    await proxy?.close();
    await db?.drop();
  });

  const rowOf = (id: string) =>
    withClient(
      db.url,
      async (c) =>
        (
          await c.query(
            `SELECT status, instance_id, generation::int, attempt, failed_attempts, status_message
               FROM task WHERE id = $1`,
            [id],
          )
        ).rows[0] as Record<string, unknown>,
    );

  /**
   * Arms the trap for the next COMMIT of the worker that names `owner` (its change notification does): once
   * it springs, PostgreSQL is out of reach (every connection cut, new ones refused) for `darkMs`, then back.
   * Resolves when it is back.
   */
  const loseCommitThenOutage = (owner: string, darkMs: number): Promise<void> =>
    proxy
      .loseCommitReply((sql) => sql.includes(`"${owner}"`))
      .then(async () => {
        proxy.refuse(() => true);
        proxy.cut(() => true);
        await sleep(darkMs);
        proxy.refuse(undefined);
      });

  it('a claim committed unheard runs its task here once PostgreSQL is back: completed, no attempt charged', async () => {
    const owner = 'o-lost-claim';
    const back = loseCommitThenOutage(owner, 1500);
    const task = (await web.get(TaskCreationService).create(legacyTaskInput(owner, { principal: PRINCIPAL })))
      .task;
    expect(task).toMatchObject({ instanceId: null, statusMessage: QUEUED_MESSAGE });
    await back;
    // The claim landed (leased here at generation 2) though the claimer never heard so.
    expect(await rowOf(task.id)).toMatchObject({ status: 'working', instance_id: me, generation: 2 });
    const run = await exec.run(task.id, 0, 15000);
    expect(run.task).toMatchObject({ generation: 2, attempt: 1, instanceId: me });
    expect(run.ctx.storedPrincipal).toEqual(PRINCIPAL);
    run.complete();
    await waitFor(async () => (await rowOf(task.id)).status === 'completed', 10000);
    expect(await rowOf(task.id)).toMatchObject({ attempt: 1, failed_attempts: 0, generation: 2 });
    expect(exec.runs.filter((r) => r.task.id === task.id)).toHaveLength(1);
    expect(worker.get(UnresolvedLeases).pending).toBe(0);
  });

  it('without a free slot when PostgreSQL is back, the claimed task goes back to the queue uncharged, then runs', async () => {
    const owner = 'o-lost-claim-full';
    const claimer = worker.get(TaskClaimer);
    const back = loseCommitThenOutage(owner, 1500);
    const task = (await web.get(TaskCreationService).create(legacyTaskInput(owner, { principal: PRINCIPAL })))
      .task;
    // While the database is out of reach, the one slot is taken (as a creation leased here would).
    await waitFor(() => proxy.commitTrapsArmed === 0 || undefined, 5000);
    await sleep(300);
    expect(claimer.tryReserve('a-creation')).toBe(true);
    await back;
    // Given back: no instance, the next generation, the same attempt, no failure counted.
    await waitFor(async () => ((await rowOf(task.id)).instance_id === null ? true : undefined), 15000);
    expect(await rowOf(task.id)).toMatchObject({
      status: 'working',
      generation: 3,
      attempt: 1,
      failed_attempts: 0,
      status_message: QUEUED_MESSAGE,
    });
    expect(exec.runs.filter((r) => r.task.id === task.id)).toHaveLength(0);
    // The slot comes free: the task is claimed again from the queue and runs.
    claimer.release('a-creation');
    const run = await exec.run(task.id, 0, 10000);
    expect(run.task).toMatchObject({ generation: 4, attempt: 1 });
    run.complete();
    await waitFor(async () => (await rowOf(task.id)).status === 'completed', 10000);
    expect(await rowOf(task.id)).toMatchObject({ attempt: 1, failed_attempts: 0 });
  });

  it('a keyed creation committed unheard runs once PostgreSQL is back, and a repeat with its key sees it complete', async () => {
    const owner = 'o-lost-keyed';
    const tasks = worker.get(TasksService);
    const creation = worker.get(TaskCreationService);
    const input = legacyTaskInput(owner, { principal: PRINCIPAL });
    const key = { idempotencyKey: 'key-lost-commit', requestHash: 'hash-1' };
    const back = loseCommitThenOutage(owner, 1500);
    // Its answer is lost and PostgreSQL stays out of reach: the caller is told of an outage.
    await expect(creation.create(input, { key })).rejects.toBeDefined();
    await back;
    const repeat = await waitFor(() => creation.create(input, { key }).catch(() => undefined), 10000, 200);
    expect(repeat.created).toBe(false);
    const run = await exec.run(repeat.task.id, 0, 15000);
    expect(run.task).toMatchObject({ attempt: 1, instanceId: me });
    run.complete();
    const done = await tasks.waitForTerminal(owner, repeat.task.id, { timeoutMs: 10000 });
    expect(done.kind === 'terminal' && done.task.status).toBe('completed');
    expect(await rowOf(repeat.task.id)).toMatchObject({ attempt: 1, failed_attempts: 0 });
    expect(exec.runs.filter((r) => r.task.id === repeat.task.id)).toHaveLength(1);
    // A third repeat answers the same, finished task.
    expect(await creation.create(input, { key })).toMatchObject({
      created: false,
      task: { id: repeat.task.id, status: 'completed' },
    });
  });

  // Last: it leaves the worker draining.
  it('an instance draining when PostgreSQL is back gives the claimed task back to the queue uncharged', async () => {
    const owner = 'o-lost-claim-drain';
    const back = loseCommitThenOutage(owner, 1500);
    const task = (await web.get(TaskCreationService).create(legacyTaskInput(owner, { principal: PRINCIPAL })))
      .task;
    await waitFor(() => proxy.commitTrapsArmed === 0 || undefined, 5000);
    worker.get(LifecycleService).announceDrain();
    await back;
    await waitFor(async () => ((await rowOf(task.id)).instance_id === null ? true : undefined), 15000);
    expect(await rowOf(task.id)).toMatchObject({
      status: 'working',
      generation: 3,
      attempt: 1,
      failed_attempts: 0,
      status_message: QUEUED_MESSAGE,
    });
    expect(exec.runs.filter((r) => r.task.id === task.id)).toHaveLength(0);
    expect(worker.get(UnresolvedLeases).pending).toBe(0);
  });
});
