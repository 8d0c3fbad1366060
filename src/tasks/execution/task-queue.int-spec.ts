import type { INestApplication } from '@nestjs/common';
import { createTestApp } from '../../../test/support/test-app.js';
import { newTaskRow } from '../../../test/support/task-registry.js';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.js';
import { PgBusService } from '../../bus/pg-bus.service.js';
import { InstancesService } from '../../instances/instances.service.js';
import { TaskCreationRepository } from '../store/task-creation.repository.js';
import { queuedNotice, TASK_QUEUE_CHANNEL, type QueuedNotice } from '../task-queue.js';
import { TaskWorkerRepository } from '../store/task-worker.repository.js';

const LIMITS = { maxPerOwner: 100, maxTotal: 1000, maxRetainedPerOwner: 1000 };

/**
 * The queue's two entrances in the registry (issue 22): a task created without an instance is queued, and a
 * run gives its task back with `requeue`, fenced like every worker write. Both announce the task on the queue
 * channel at commit, so claimers on any instance wake without polling.
 */
describe('queued tasks and requeue (real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let creations: TaskCreationRepository;
  let worker: TaskWorkerRepository;
  let me: string;
  const notices: QueuedNotice[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('task_queue');
    app = await createTestApp(db.url, { JANITOR_ENABLED: 'false' });
    creations = app.get(TaskCreationRepository);
    worker = app.get(TaskWorkerRepository);
    me = app.get(InstancesService).instanceId;
    app.get(PgBusService).subscribe(TASK_QUEUE_CHANNEL, (p) => {
      const n = queuedNotice(p);
      if (n) notices.push(n);
    });
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  const noticeFor = async (id: string): Promise<QueuedNotice> => {
    for (let i = 0; i < 100; i++) {
      const n = notices.find((x) => x.taskId === id);
      if (n) return n;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`no queue notice for ${id}`);
  };

  it('inserts a task without an instance as queued, claimable now, and announces it', async () => {
    const t = await creations.insertWithLimits({ ...newTaskRow(me, 'o1'), instanceId: null }, LIMITS);
    expect(t).toMatchObject({ status: 'working', instanceId: null, leaseExpiresAt: null, attempt: 1 });
    expect(t.availableAt).toBeInstanceOf(Date);
    expect((await noticeFor(t.id)).availableAtMs).toBe(t.availableAt?.getTime());
    // A task leased at creation is not queued and not announced.
    const leased = await creations.insertWithLimits(newTaskRow(me, 'o1'), LIMITS);
    expect(leased).toMatchObject({ instanceId: me, availableAt: null });
    await new Promise((r) => setTimeout(r, 200));
    expect(notices.some((n) => n.taskId === leased.id)).toBe(false);
  });

  it('requeues under the fence: next attempt, later availability, and a stale run refused', async () => {
    const t = await creations.insertWithLimits(newTaskRow(me, 'o2'), LIMITS);
    const fence = { taskId: t.id, generation: t.generation, instanceId: me };
    const r = await worker.requeue(fence, {
      delayMs: 5000,
      failed: true,
      lastError: { code: -32603, message: 'boom' },
      statusMessage: 'Attempt 1 failed: boom; attempt 2 in 5 s',
    });
    if (!r.applied) throw new Error(`requeue refused: ${r.reason}`);
    expect(r.task).toMatchObject({
      status: 'working',
      instanceId: null,
      generation: t.generation + 1,
      attempt: 2,
      failedAttempts: 1,
      statusMessage: 'Attempt 1 failed: boom; attempt 2 in 5 s',
    });
    const waitMs = (r.task.availableAt?.getTime() ?? 0) - r.task.lastUpdatedAt.getTime();
    expect(waitMs).toBeGreaterThanOrEqual(4900);
    expect(waitMs).toBeLessThanOrEqual(5100);
    expect((await noticeFor(t.id)).availableAtMs).toBe(r.task.availableAt?.getTime());
    // The run that gave the task back can no longer write to it, nor hand it back twice.
    const again = await worker.requeue(fence, { delayMs: 0, failed: false, statusMessage: 'x' });
    expect(again).toMatchObject({ applied: false, reason: 'not_current' });
    const progress = await worker.setProgressMessage(fence, 'late');
    expect(progress.applied).toBe(false);
  });

  it('does not count a hand-over against the retry budget', async () => {
    const t = await creations.insertWithLimits(newTaskRow(me, 'o3'), LIMITS);
    const r = await worker.requeue(
      { taskId: t.id, generation: t.generation, instanceId: me },
      { delayMs: 0, failed: false, statusMessage: 'Handed over' },
    );
    expect(r.applied && r.task).toMatchObject({ attempt: 2, failedAttempts: 0 });
  });
});
