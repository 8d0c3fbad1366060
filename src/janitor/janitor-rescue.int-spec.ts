import type { INestApplication } from '@nestjs/common';
import { createTestApp } from '../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
import { metricValue, sleep, waitFor } from '../../test/support/controlled-executor.js';
import { PgBusService } from '../bus/pg-bus.service.js';
import { queuedNotice, TASK_QUEUE_CHANNEL, type QueuedNotice } from '../tasks/task-queue.js';
import { InstancesService } from '../instances/instances.service.js';
import { TaskCreationRepository } from '../tasks/store/task-creation.repository.js';
import { TasksService } from '../tasks/registry/tasks.service.js';
import { newTaskRow } from '../../test/support/task-registry.js';
import { JanitorService } from './janitor.service.js';

const LEASE_MS = 1000;
const ENV = {
  JANITOR_ENABLED: 'false',
  TASK_LEASE_MS: String(LEASE_MS),
  // Nothing here claims the re-queued tasks (an instance that takes calls and runs no task work), so each
  // test reads the rescue as the janitor left it.
  INSTANCE_ROLE: 'web',
};
const WORKER_LOST = 'worker lost: the server running this task stopped';

const LIMITS = { maxPerOwner: 100, maxTotal: 1000, maxRetainedPerOwner: 1000 };

/**
 * Rescue after a lost worker (issue 22, item 6), on real PostgreSQL: a resumable task with attempts left is
 * re-queued as its next attempt (announced on the queue channel, its checkpoint kept), one whose attempts
 * are used up fails naming them, and a plain task fails "worker lost" as it always did. Both ways a worker
 * is found lost are covered: a lapsed lease (the sweep) and a stopped instance (startup recovery).
 */
describe('janitor rescue of resumable tasks (real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  const notices: QueuedNotice[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('janitor_rescue');
    app = await createTestApp(db.url, ENV);
    app.get(PgBusService).subscribe(TASK_QUEUE_CHANNEL, (p) => {
      const n = queuedNotice(p);
      if (n) notices.push(n);
    });
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  /** A task leased to this instance and never run (nobody renews its lease), with the given durability. */
  const lostTask = async (
    ownerId: string,
    cols: { resumable: boolean; maxAttempts: number; attempt?: number; failedAttempts?: number },
  ) => {
    const me = app.get(InstancesService).instanceId;
    const t = await app
      .get(TaskCreationRepository)
      .insertWithLimits({ ...newTaskRow(me, ownerId), toolName: 'slow_tool', leaseMs: LEASE_MS }, LIMITS);
    await withClient(db.url, (c) =>
      c.query(
        `UPDATE task SET resumable = $2, max_attempts = $3, attempt = $4, failed_attempts = $5,
                checkpoint = '{"step": 7}'::jsonb WHERE id = $1`,
        [t.id, cols.resumable, cols.maxAttempts, cols.attempt ?? 1, cols.failedAttempts ?? 0],
      ),
    );
    return t;
  };
  const row = async (id: string) =>
    withClient(db.url, async (c) => {
      const r = await c.query(
        `SELECT status, status_message, error, instance_id, lease_expires_at, generation::int, attempt,
                failed_attempts, last_error, checkpoint, available_at <= now() AS claimable
           FROM task WHERE id = $1`,
        [id],
      );
      return r.rows[0];
    });

  it('a lapsed lease re-queues a resumable task as attempt N+1, fails an exhausted one naming its failed attempts, and a plain one as before', async () => {
    const before = {
      requeued: await metricValue(app, 'mcp_task_rescues_total', { outcome: 'requeued' }),
      failed: await metricValue(app, 'mcp_task_rescues_total', { outcome: 'failed' }),
      finished: await metricValue(app, 'mcp_tasks_finished_total', { tool: 'slow_tool', status: 'failed' }),
    };
    const resumable = await lostTask('r1', {
      resumable: true,
      maxAttempts: 3,
      attempt: 2,
      failedAttempts: 1,
    });
    const exhausted = await lostTask('r1', {
      resumable: true,
      maxAttempts: 3,
      attempt: 4,
      failedAttempts: 2,
    });
    const plain = await lostTask('r1', { resumable: false, maxAttempts: 1 });
    await sleep(LEASE_MS + 300);

    const r = await app.get(JanitorService).runOnce();
    expect(r.rows.lease_lapsed).toBe(3);

    expect(await row(resumable.id)).toEqual({
      status: 'working',
      status_message: 'Rescued: the worker of attempt 2 was lost; attempt 3 waits for a worker',
      error: null,
      instance_id: null,
      lease_expires_at: null,
      generation: resumable.generation + 1,
      attempt: 3,
      failed_attempts: 2,
      last_error: { code: -32603, message: WORKER_LOST },
      checkpoint: { step: 7 },
      claimable: true,
    });
    const notice = await waitFor(() => notices.find((n) => n.taskId === resumable.id));
    expect(notice.availableAtMs).toBeLessThanOrEqual(Date.now());
    // What a client polling tasks/get sees: still working, saying why it waits.
    expect(await app.get(TasksService).get('r1', resumable.id)).toMatchObject({
      status: 'working',
      statusMessage: 'Rescued: the worker of attempt 2 was lost; attempt 3 waits for a worker',
    });

    const message = `Failed after 3 attempts: ${WORKER_LOST}`;
    expect(await row(exhausted.id)).toMatchObject({
      status: 'failed',
      status_message: message,
      error: { code: -32603, message },
      instance_id: null,
      attempt: 4,
      failed_attempts: 3,
      last_error: { code: -32603, message: WORKER_LOST },
    });
    expect(await row(plain.id)).toMatchObject({
      status: 'failed',
      status_message: WORKER_LOST,
      error: { code: -32603, message: WORKER_LOST },
      instance_id: null,
      generation: plain.generation + 1,
      attempt: 1,
      failed_attempts: 0,
      last_error: null,
    });
    await sleep(100);
    expect(notices.some((n) => n.taskId === exhausted.id || n.taskId === plain.id)).toBe(false);

    expect(await metricValue(app, 'mcp_task_rescues_total', { outcome: 'requeued' })).toBe(
      before.requeued + 1,
    );
    expect(await metricValue(app, 'mcp_task_rescues_total', { outcome: 'failed' })).toBe(before.failed + 2);
    // A re-queued task has not finished: only the two failures count as finished.
    expect(await metricValue(app, 'mcp_tasks_finished_total', { tool: 'slow_tool', status: 'failed' })).toBe(
      before.finished + 2,
    );

    // The re-queued task is no longer the lost worker's: another sweep leaves it alone.
    const again = await app.get(JanitorService).runOnce();
    expect(again.rows.lease_lapsed).toBe(0);
    expect((await row(resumable.id)).attempt).toBe(3);
  });

  it('a starting instance re-queues the resumable tasks a stopped instance left running', async () => {
    const dead = '00000000-0000-4000-8000-000000000002';
    const resumable = await lostTask('s1', { resumable: true, maxAttempts: 5 });
    const plain = await lostTask('s1', { resumable: false, maxAttempts: 1 });
    await withClient(db.url, async (c) => {
      await c.query(
        `INSERT INTO service_instance (id, hostname, pid, version, started_at, heartbeat_at, stopped_at)
         VALUES ($1, 'gone-host', 1, 'old', now() - interval '2 hours', now() - interval '1 hour',
                 now() - interval '1 hour')`,
        [dead],
      );
      // Both look left running by that stopped instance, with leases still valid: startup recovery must
      // not wait for them to lapse.
      await c.query(
        `UPDATE task SET instance_id = $1, lease_expires_at = now() + interval '1 hour' WHERE id = ANY($2)`,
        [dead, [resumable.id, plain.id]],
      );
    });
    const next = await createTestApp(db.url, ENV);
    try {
      expect(await row(resumable.id)).toMatchObject({
        status: 'working',
        status_message: 'Rescued: the worker of attempt 1 was lost; attempt 2 waits for a worker',
        instance_id: null,
        lease_expires_at: null,
        attempt: 2,
        failed_attempts: 1,
        checkpoint: { step: 7 },
        claimable: true,
      });
      expect(await row(plain.id)).toMatchObject({ status: 'failed', status_message: WORKER_LOST });
      expect(await metricValue(next, 'mcp_task_rescues_total', { outcome: 'requeued' })).toBe(1);
      expect(await metricValue(next, 'mcp_task_rescues_total', { outcome: 'failed' })).toBe(1);
    } finally {
      await next.close();
    }
  });
});
