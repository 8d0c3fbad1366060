import type { INestApplication } from '@nestjs/common';
import { createTestApp } from '../../../test/support/test-app.js';
import { newTaskRow } from '../../../test/support/task-registry.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import { InstancesService } from '../../instances/instances.service.js';
import { MetricsService } from '../../metrics/metrics.service.js';
import { QuotaService } from '../../quotas/quota.service.js';
import { CheckpointError } from '../../tool-dispatch/checkpoint.js';
import { TaskCreationRepository } from '../store/task-creation.repository.js';
import { TaskWorkerRepository, type WorkerFence } from '../store/task-worker.repository.js';
import { TasksService } from '../registry/tasks.service.js';

const LIMITS = { maxPerOwner: 100, maxTotal: 1000, maxRetainedPerOwner: 1000 };

/**
 * Checkpoints are written under the run's fence (issue 22): a run that lost its task can never overwrite
 * what a newer run saved, and a state over QUOTA_TASK_CHECKPOINT_BYTES is refused before the task is
 * touched. A task waiting out a retry's backoff is queued with no worker, so a cancel ends it at once.
 */
describe('checkpoints and backoff waits (real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let creations: TaskCreationRepository;
  let worker: TaskWorkerRepository;
  let tasks: TasksService;
  let quotas: QuotaService;
  let me: string;

  beforeAll(async () => {
    db = await createTestDatabase('task_checkpoint');
    app = await createTestApp(db.url, { JANITOR_ENABLED: 'false', QUOTA_TASK_CHECKPOINT_BYTES: '300' });
    creations = app.get(TaskCreationRepository);
    worker = app.get(TaskWorkerRepository);
    tasks = app.get(TasksService);
    quotas = app.get(QuotaService);
    me = app.get(InstancesService).instanceId;
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  /** Another run takes the task over (what a claim does: next generation, leased here). */
  const newerRun = async (fence: WorkerFence): Promise<WorkerFence> => {
    const generation = await withClient(db.url, async (c) => {
      const r = await c.query<{ generation: number }>(
        `UPDATE task SET generation = generation + 1, lease_expires_at = now() + interval '30 seconds'
          WHERE id = $1 RETURNING generation`,
        [fence.taskId],
      );
      return Number(r.rows[0].generation);
    });
    return { ...fence, generation };
  };
  const stored = (id: string): Promise<unknown> => worker.readCheckpoint(id);

  it('keeps a newer run’s checkpoint: a stale run’s save is refused', async () => {
    const t = await creations.insertWithLimits(newTaskRow(me, 'o1'), LIMITS);
    expect(await stored(t.id)).toBeUndefined();
    const first: WorkerFence = { taskId: t.id, generation: t.generation, instanceId: me };
    expect((await worker.saveCheckpoint(first, '{"step":1}')).applied).toBe(true);
    expect(await stored(t.id)).toEqual({ step: 1 });

    const second = await newerRun(first);
    expect((await worker.saveCheckpoint(second, '{"step":5}')).applied).toBe(true);
    const stale = await worker.saveCheckpoint(first, '{"step":2}');
    expect(stale).toMatchObject({ applied: false, reason: 'not_current' });
    expect(await stored(t.id)).toEqual({ step: 5 });
    // Another instance's fence is refused the same way.
    const foreign = await worker.saveCheckpoint(
      { ...second, instanceId: '00000000-0000-4000-8000-000000000000' },
      '{"step":9}',
    );
    expect(foreign.applied).toBe(false);
    expect(await stored(t.id)).toEqual({ step: 5 });
  });

  it('refuses a checkpoint over the cap naming the setting and both sizes, counts it, and leaves the task as it was', async () => {
    const t = await creations.insertWithLimits(newTaskRow(me, 'o2'), LIMITS);
    const fence: WorkerFence = { taskId: t.id, generation: t.generation, instanceId: me };
    // What the runner does with every checkpoint: QuotaService.checkpointJson, then the fenced write.
    const save = async (state: unknown) => worker.saveCheckpoint(fence, quotas.checkpointJson(state));
    const refusals = async () =>
      (
        await app.get(MetricsService).registry.getSingleMetric('mcp_quota_rejections_total')!.get()
      ).values.find((v) => v.labels.quota === 'task_checkpoint_bytes')?.value;
    await save({ step: 1 });
    const before = await refusals();
    const refused = save({ blob: 'x'.repeat(400) });
    await expect(refused).rejects.toBeInstanceOf(CheckpointError);
    await expect(refused).rejects.toThrow(
      'The checkpoint is 411 bytes of JSON, over QUOTA_TASK_CHECKPOINT_BYTES = 300 bytes',
    );
    expect(await refusals()).toBe(before! + 1);
    // Not JSON is refused too, but it is not a quota: not counted.
    await expect(save({ f: () => 1 })).rejects.toThrow(
      'The checkpoint is not JSON: checkpoint.f is a function',
    );
    expect(await refusals()).toBe(before! + 1);
    expect(await stored(t.id)).toEqual({ step: 1 });
    const after = await tasks.get('o2', t.id);
    expect(after).toMatchObject({ status: 'working', generation: t.generation });
  });

  it('cancels a task waiting out its backoff at once', async () => {
    const t = await creations.insertWithLimits({ ...newTaskRow(me, 'o3'), maxAttempts: 5 }, LIMITS);
    const r = await worker.requeue(
      { taskId: t.id, generation: t.generation, instanceId: me },
      {
        delayMs: 60000,
        failed: true,
        lastError: { code: -32603, message: 'boom' },
        statusMessage: 'waiting',
      },
    );
    expect(r.applied && r.task).toMatchObject({ status: 'working', instanceId: null, failedAttempts: 1 });
    const started = performance.now();
    const cancelled = await tasks.cancel('o3', t.id);
    const tookMs = performance.now() - started;
    expect(cancelled).toMatchObject({ status: 'cancelled' });
    expect((await tasks.get('o3', t.id)).status).toBe('cancelled');
    // No worker to wait for: one transaction, nowhere near the 60 s backoff.
    expect(tookMs).toBeLessThan(2000);
  });
});
