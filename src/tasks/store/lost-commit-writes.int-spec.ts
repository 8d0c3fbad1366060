import type { INestApplication } from '@nestjs/common';
import { ControlledExecutor, metricValue, waitFor } from '../../../test/support/controlled-executor.js';
import { PgProxy } from '../../../test/support/pg-proxy.js';
import { newTaskRow } from '../../../test/support/task-registry.js';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import { CommitOutcomeUnknownError } from '../../database/sql-transaction.js';
import { InstancesService } from '../../instances/instances.service.js';
import { TaskRunnerService } from '../execution/task-runner.service.js';
import type { TaskSnapshot } from '../task.types.js';
import { TasksRepository } from './tasks.repository.js';
import { TaskCreationRepository } from './task-creation.repository.js';
import { TaskWorkerRepository, type WorkerFence } from './task-worker.repository.js';
import type { CreationLimits } from './creation-limits.js';
import { TaskCreationService } from '../execution/task-creation.service.js';

/**
 * The task writes other than creations and outcomes (cancel, tasks/update answers, the runner's park,
 * status and progress), when PostgreSQL carries out their COMMIT but its answer never reaches the server
 * (a proxy cuts the connection at exactly that step): each must find out that its own write landed and
 * answer as if the answer had arrived, not with an outage.
 */
describe('task writes whose COMMIT answer is lost (real PostgreSQL through a proxy)', () => {
  let db: TestDatabase;
  let proxy: PgProxy;
  let app: INestApplication;
  let repo: TasksRepository;
  let creations: TaskCreationRepository;
  let worker: TaskWorkerRepository;
  let executor: ControlledExecutor;
  let me: string;
  const roomy: CreationLimits = { maxPerOwner: 100000, maxTotal: 1000000, maxRetainedPerOwner: 1000000 };
  const inputLimits = { maxRounds: 10, maxKeys: 10, maxStateBytes: 65536 };

  beforeAll(async () => {
    db = await createTestDatabase('lost_commit_writes');
    proxy = await PgProxy.start(db.url);
    executor = new ControlledExecutor();
    app = await createTestApp(proxy.via(db.url), { JANITOR_ENABLED: 'false' }, [], { taskWork: executor });
    repo = app.get(TasksRepository);
    creations = app.get(TaskCreationRepository);
    worker = app.get(TaskWorkerRepository);
    me = app.get(InstancesService).instanceId;
  });
  afterAll(async () => {
    await app.close();
    await proxy.close();
    await db.drop();
  });

  /** The COMMIT that carries the change notification of task `id`. */
  const commitOf = (id: string) => (sql: string) => sql.includes(id);
  const started = async (owner: string): Promise<{ task: TaskSnapshot; fence: WorkerFence }> => {
    const task = await creations.insertWithLimits(newTaskRow(me, owner), roomy);
    return { task, fence: { taskId: task.id, generation: task.generation, instanceId: me } };
  };
  const rowOf = (id: string) =>
    withClient(
      db.url,
      async (c) =>
        (
          await c.query(
            'SELECT status, status_message, generation::int, instance_id, input_responses FROM task WHERE id = $1',
            [id],
          )
        ).rows[0] as Record<string, unknown>,
    );

  it('a cancel committed unheard answers the cancelled task, as a heard one does', async () => {
    const { task } = await started('lost-cancel');
    const lost = proxy.loseCommitReply(commitOf(task.id));
    const r = await repo.cancelIfLive('lost-cancel', task.id, 'cancelled by request');
    await lost;
    expect(r).toMatchObject({
      applied: true,
      task: { status: 'cancelled', generation: task.generation + 1 },
    });
    expect(await rowOf(task.id)).toMatchObject({ status: 'cancelled', generation: task.generation + 1 });
    // Only that one cancel landed: a second one is refused as before.
    expect(await repo.cancelIfLive('lost-cancel', task.id, 'again')).toMatchObject({ applied: false });
  });

  it('a park committed unheard proceeds as parked', async () => {
    const { task, fence } = await started('lost-park');
    const lost = proxy.loseCommitReply(commitOf(task.id));
    const r = await worker.parkForInput(
      fence,
      { q: { method: 'elicitation/create' } },
      { at: 1 },
      inputLimits,
    );
    await lost;
    expect(r).toMatchObject({ applied: true, limitBroken: null, task: { status: 'input_required' } });
    expect(await rowOf(task.id)).toMatchObject({ status: 'input_required', instance_id: null });
  });

  it('answers merged unheard are answered as accepted, and the task resumes', async () => {
    const { task, fence } = await started('lost-merge');
    const parked = await worker.parkForInput(
      fence,
      { q: { method: 'elicitation/create' } },
      null,
      inputLimits,
    );
    const keys = Object.keys(parked.task!.inputRequests);
    const lost = proxy.loseCommitReply(commitOf(task.id));
    const r = await repo.mergeInputResponses(
      'lost-merge',
      task.id,
      { [keys[0]]: { action: 'accept' }, stray: 1 },
      { instanceId: me, leaseMs: 30000 },
    );
    await lost;
    expect(r).toMatchObject({
      accepted: keys,
      ignored: ['stray'],
      resumed: true,
      task: { status: 'working' },
    });
    expect(await rowOf(task.id)).toMatchObject({
      status: 'working',
      instance_id: me,
      input_responses: { [keys[0]]: { action: 'accept' } },
    });
  });

  it('a progress message committed unheard is answered as applied', async () => {
    const { task, fence } = await started('lost-progress');
    const lost = proxy.loseCommitReply(commitOf(task.id));
    const r = await worker.setProgressMessage(fence, 'half way');
    await lost;
    expect(r).toMatchObject({ applied: true, task: { status: 'working', statusMessage: 'half way' } });
    expect(await rowOf(task.id)).toMatchObject({ status_message: 'half way' });
  });

  it('a status change committed unheard is answered as applied', async () => {
    const { task, fence } = await started('lost-status');
    const lost = proxy.loseCommitReply(commitOf(task.id));
    const r = await worker.setWorkerStatus(fence, 'input_required', 'need an answer');
    await lost;
    expect(r).toMatchObject({ applied: true, previous: 'working', task: { status: 'input_required' } });
    expect(await rowOf(task.id)).toMatchObject({ status: 'input_required', instance_id: me });
  });

  it("the runner's park committed unheard is not counted as a stale write", async () => {
    const task = (
      await app.get(TaskCreationService).create({
        ownerId: 'lost-run-park',
        era: 'modern',
        toolName: 't',
        requestParams: {},
        mode: 'immediate',
      })
    ).task;
    const run = await executor.run(task.id);
    const stale = await metricValue(app, 'mcp_task_stale_completions_total');
    const lost = proxy.loseCommitReply(commitOf(task.id));
    run.park({ q: { method: 'elicitation/create' } }, { at: 1 });
    await lost;
    await waitFor(() => !app.get(TaskRunnerService).isRunning(task.id) || undefined);
    expect(await metricValue(app, 'mcp_task_stale_completions_total')).toBe(stale);
    expect(await rowOf(task.id)).toMatchObject({ status: 'input_required', instance_id: null });
  });

  /** Once the trapped COMMIT's answer is lost, PostgreSQL is out of reach: every connection cut, new ones refused. */
  const thenUnreachable = (lost: Promise<string>): Promise<string> =>
    lost.then((sql) => {
      proxy.refuse(() => true);
      proxy.cut(() => true);
      return sql;
    });

  it('a cancel that cannot find out after its answer is lost rejects as an outage, and had landed', async () => {
    const { task } = await started('lost-cancel-dark');
    const lost = thenUnreachable(proxy.loseCommitReply(commitOf(task.id)));
    try {
      const r = repo.cancelIfLive('lost-cancel-dark', task.id, 'cancelled by request');
      await expect(r).rejects.toBeInstanceOf(CommitOutcomeUnknownError);
      await lost;
    } finally {
      proxy.refuse(undefined);
    }
    expect(await rowOf(task.id)).toMatchObject({ status: 'cancelled' });
  });

  it("the runner's park through an outage after its lost answer resolves to parked, not a stale write", async () => {
    const task = (
      await app.get(TaskCreationService).create({
        ownerId: 'lost-run-park-dark',
        era: 'modern',
        toolName: 't',
        requestParams: {},
        mode: 'immediate',
      })
    ).task;
    const run = await executor.run(task.id);
    const stale = await metricValue(app, 'mcp_task_stale_completions_total');
    const lost = thenUnreachable(proxy.loseCommitReply(commitOf(task.id)));
    try {
      run.park({ q: { method: 'elicitation/create' } }, { at: 1 });
      await lost;
      // The park landed; the runner cannot learn so while PostgreSQL is out of reach, and keeps trying.
      await new Promise((r) => setTimeout(r, 800));
      expect(await rowOf(task.id)).toMatchObject({ status: 'input_required', instance_id: null });
      expect(app.get(TaskRunnerService).isRunning(task.id)).toBe(true);
    } finally {
      proxy.refuse(undefined);
    }
    await waitFor(() => !app.get(TaskRunnerService).isRunning(task.id) || undefined, 10000);
    expect(await metricValue(app, 'mcp_task_stale_completions_total')).toBe(stale);
    expect(await rowOf(task.id)).toMatchObject({ status: 'input_required', instance_id: null });
  });
});
