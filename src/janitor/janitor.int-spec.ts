import type { INestApplication } from '@nestjs/common';
import { createTestApp } from '../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
import { ControlledExecutor, metricValue, sleep, waitFor } from '../../test/support/controlled-executor.js';
import { AdvisoryLockKey } from '../database/advisory-locks.js';
import { InstancesService } from '../instances/instances.service.js';
import type { TaskChange } from '../tasks/task.types.js';
import { TasksService } from '../tasks/registry/tasks.service.js';
import { TaskCreationService, type CreateTaskInput } from '../tasks/execution/task-creation.service.js';
import { TaskClaimer } from '../tasks/execution/task-claimer.service.js';
import { JanitorService } from './janitor.service.js';

const ENV = {
  JANITOR_ENABLED: 'false',
  TASK_EXPIRED_GRACE_MS: '0',
  TASK_LEASE_MS: '1500',
  JANITOR_BATCH_SIZE: '50',
};

const input = (ownerId: string, extra: Partial<CreateTaskInput> = {}): CreateTaskInput => ({
  ownerId,
  era: 'modern',
  toolName: 'slow_tool',
  requestParams: { name: 'slow_tool', arguments: {} },
  ...extra,
});

describe('tasks across two instances, leases and the janitor', () => {
  let db: TestDatabase;
  let a: INestApplication;
  let b: INestApplication;
  let execA: ControlledExecutor;
  let execB: ControlledExecutor;

  beforeAll(async () => {
    db = await createTestDatabase('janitor');
    execA = new ControlledExecutor();
    execB = new ControlledExecutor();
    a = await createTestApp(db.url, ENV, [], { taskWork: execA });
    b = await createTestApp(db.url, ENV, [], { taskWork: execB });
  });
  afterAll(async () => {
    await Promise.all([a.close(), b.close()]);
    await db.drop();
  });

  it('wakes a waiter on A within moments of a completion made on B, and tells A about every change', async () => {
    const changes: TaskChange[] = [];
    const off = a.get(TasksService).onTaskChanged((c) => changes.push(c));
    try {
      const t = (await b.get(TaskCreationService).create(input('w-owner'))).task;
      const run = await execB.run(t.id);
      const waiting = a.get(TasksService).waitForTerminal('w-owner', t.id, { timeoutMs: 20000 });
      await sleep(200);
      const t0 = Date.now();
      run.complete({ content: [{ type: 'text', text: 'from B' }] });
      const r = await waiting;
      // The safety poll is 5 s: a wake this fast came from the notification.
      expect(Date.now() - t0).toBeLessThan(1500);
      expect(r.kind === 'terminal' && r.task.result).toEqual({ content: [{ type: 'text', text: 'from B' }] });
      await waitFor(() => changes.filter((c) => c.taskId === t.id).length >= 2);
      expect(changes.filter((c) => c.taskId === t.id).map((c) => [c.previousStatus, c.status])).toEqual([
        [null, 'working'],
        ['working', 'completed'],
      ]);
      expect(changes[0]).toMatchObject({ ownerId: 'w-owner', era: 'modern', sessionId: null });
    } finally {
      off();
    }
  });

  it('a cancel on A aborts the worker running on B, whose late result is dropped and counted there', async () => {
    const before = await metricValue(b, 'mcp_task_stale_completions_total', { tool: 'slow_tool' });
    const t = (await b.get(TaskCreationService).create(input('c-owner'))).task;
    const run = await execB.run(t.id);
    await a.get(TasksService).cancel('c-owner', t.id);
    await waitFor(() => run.ctx.signal.aborted, 3000);
    run.complete({ content: [{ type: 'text', text: 'late' }] });
    await waitFor(async () =>
      (await metricValue(b, 'mcp_task_stale_completions_total', { tool: 'slow_tool' })) === before + 1
        ? true
        : undefined,
    );
    expect(await a.get(TasksService).get('c-owner', t.id)).toMatchObject({
      status: 'cancelled',
      result: null,
    });
  });

  it('resumes a parked task on the instance that merged the last answer', async () => {
    const t = (await b.get(TaskCreationService).create(input('r-owner'))).task;
    (await execB.run(t.id)).park(
      { ok: { method: 'elicitation/create', params: { message: 'OK?' } } },
      { at: 'B' },
    );
    await waitFor(async () =>
      (await a.get(TasksService).get('r-owner', t.id)).status === 'input_required' ? true : undefined,
    );
    const merged = await a.get(TasksService).submitInput('r-owner', t.id, { 'r1.ok': { action: 'accept' } });
    expect(merged.resumed).toBe(true);
    expect(merged.task.instanceId).toBe(a.get(InstancesService).instanceId);
    const resumed = await execA.run(t.id);
    expect(resumed.ctx).toMatchObject({
      handlerState: { at: 'B' },
      answers: { 'r1.ok': { action: 'accept' } },
    });
    resumed.complete();
    const r = await b.get(TasksService).waitForTerminal('r-owner', t.id, { timeoutMs: 5000 });
    expect(r.kind === 'terminal' && r.task.status).toBe('completed');
  });

  it('renews the leases of running tasks, and the janitor fails a task whose lease lapsed', async () => {
    const running = (await a.get(TaskCreationService).create(input('l-owner'))).task;
    await execA.run(running.id);
    // Created but never started here: nobody renews its lease (as if its process had died).
    const orphan = (await a.get(TaskCreationService).create(input('l-owner'), { placement: 'here' })).task;
    await sleep(1800);
    const r = await b.get(JanitorService).runOnce();
    expect(r.result).toBe('ok');
    expect(r.rows.lease_lapsed).toBe(1);
    const lost = await b.get(TasksService).get('l-owner', orphan.id);
    expect(lost).toMatchObject({
      status: 'failed',
      statusMessage: 'worker lost: the server running this task stopped',
      error: { code: -32603, message: 'worker lost: the server running this task stopped' },
    });
    const alive = await b.get(TasksService).get('l-owner', running.id);
    expect(alive.status).toBe('working');
    expect(alive.leaseExpiresAt!.getTime()).toBeGreaterThan(Date.now());
    expect(await metricValue(b, 'mcp_task_rescues_total', { outcome: 'failed' })).toBe(1);
    (await execA.run(running.id)).complete();
  });

  it('expiry: the sweep fails a live task past its ttl, aborts its worker on the other instance, deletes the row', async () => {
    const expiredSoFar = async () =>
      (await metricValue(a, 'mcp_tasks_finished_total', { status: 'expired' })) +
      (await metricValue(b, 'mcp_tasks_finished_total', { status: 'expired' }));
    const before = await expiredSoFar();
    const t = (await b.get(TaskCreationService).create(input('e-owner', { requestedTtlMs: 300 }))).task;
    const run = await execB.run(t.id);
    const parked = (await b.get(TaskCreationService).create(input('e-owner', { requestedTtlMs: 300 }))).task;
    (await execB.run(parked.id)).park({ q: { method: 'elicitation/create', params: { message: '?' } } });
    await sleep(450);
    const r = await a.get(JanitorService).runOnce();
    // B's lease renewal also expires its own running task past the ttl on the spot, so it may beat the sweep
    // to the running one: each task is expired exactly once, by one of the two, and the sweep deletes both.
    expect(r.rows.expire).toBeGreaterThanOrEqual(1);
    expect((await expiredSoFar()) - before).toBe(2);
    expect(r.rows.delete).toBe(2);
    await waitFor(() => run.ctx.signal.aborted, 3000);
    run.complete();
    const rows = await withClient(db.url, (c) =>
      c.query('SELECT id FROM task WHERE id = ANY($1)', [[t.id, parked.id]]),
    );
    expect(rows.rows).toEqual([]);
    await expect(a.get(TasksService).get('e-owner', t.id)).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
  });

  it('only one janitor sweeps at a time, and two at once never process a row twice', async () => {
    // While another holder has the lock, a run is skipped.
    await withClient(db.url, async (c) => {
      await c.query('BEGIN');
      await c.query('SELECT pg_advisory_xact_lock($1)', [AdvisoryLockKey.Janitor]);
      const skipped = await a.get(JanitorService).runOnce();
      await c.query('ROLLBACK');
      expect(skipped.result).toBe('skipped');
    });
    // 300 expired live tasks; both janitors sweep at once until nothing is left.
    await withClient(db.url, (c) =>
      c.query(
        `INSERT INTO task (id, owner_id, era, tool_name, status, created_at, last_updated_at, ttl_ms, expires_at,
                           poll_interval_ms, request_params)
         SELECT 'bulk' || g, 'bulk-owner', 'modern', 'bulk_tool', 'working', now() - interval '1 hour',
                now() - interval '1 hour', 1000, now() - interval '59 minutes', 1000, '{}'
         FROM generate_series(1, 300) g`,
      ),
    );
    let expired = 0;
    let deleted = 0;
    for (let i = 0; i < 20; i++) {
      const reports = await Promise.all([a.get(JanitorService).runOnce(), b.get(JanitorService).runOnce()]);
      for (const rep of reports) {
        expired += rep.rows.expire;
        deleted += rep.rows.delete;
      }
      const left = await withClient(db.url, (c) =>
        c.query(`SELECT count(*)::int AS n FROM task WHERE owner_id = 'bulk-owner'`),
      );
      if (left.rows[0].n === 0) break;
    }
    expect(expired).toBe(300);
    expect(deleted).toBe(300);
  });

  it('a starting instance fails the tasks a stopped or silent instance left running', async () => {
    const dead = '00000000-0000-4000-8000-000000000001';
    const t = (await a.get(TaskCreationService).create(input('s-owner'), { placement: 'here' })).task;
    await withClient(db.url, async (c) => {
      await c.query(
        `INSERT INTO service_instance (id, hostname, pid, version, started_at, heartbeat_at)
         VALUES ($1, 'gone-host', 1, 'old', now() - interval '2 hours', now() - interval '1 hour')`,
        [dead],
      );
      // The task now looks like it was left running by that (silent) instance, with a lease still valid.
      await c.query(
        `UPDATE task SET instance_id = $1, lease_expires_at = now() + interval '1 hour' WHERE id = $2`,
        [dead, t.id],
      );
    });
    const c = await createTestApp(db.url, ENV);
    try {
      const after = await c.get(TasksService).get('s-owner', t.id);
      expect(after).toMatchObject({
        status: 'failed',
        statusMessage: 'worker lost: the server running this task stopped',
      });
      expect(await metricValue(c, 'mcp_task_rescues_total', { outcome: 'failed' })).toBe(1);
    } finally {
      await c.close();
    }
  });

  it('shutting an instance down fails its running tasks honestly instead of leaving them working', async () => {
    const execC = new ControlledExecutor();
    const c = await createTestApp(db.url, ENV, [], { taskWork: execC });
    // Its first claim of the queue holds its slots while in flight: a task created meanwhile would be queued
    // (and run by A or B). This test is about the shutdown of a run here.
    await waitFor(() => c.get(TaskClaimer).slots().free > 0);
    const t = (await c.get(TaskCreationService).create(input('d-owner'))).task;
    const run = await execC.run(t.id);
    await c.close();
    expect(run.ctx.signal.aborted).toBe(true);
    const after = await a.get(TasksService).get('d-owner', t.id);
    expect(after).toMatchObject({
      status: 'failed',
      error: { code: -32603, message: 'server shutting down' },
    });
  });

  it('TASK_MAX_TOTAL holds across instances: 60 parallel creates on two instances against 30 leave exactly 30', async () => {
    const fresh = await createTestDatabase('total');
    const env = { ...ENV, TASK_MAX_TOTAL: '30' };
    const [x, y] = await Promise.all([createTestApp(fresh.url, env), createTestApp(fresh.url, env)]);
    try {
      const results = await Promise.allSettled(
        Array.from({ length: 60 }, (_, i) =>
          (i % 2 ? x : y).get(TaskCreationService).create(input(`total-${i}`), { placement: 'here' }),
        ),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(30);
      const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(refused).toHaveLength(30);
      for (const r of refused) expect(String((r.reason as Error).message)).toContain('TASK_MAX_TOTAL = 30');
      const live = await withClient(fresh.url, (c) =>
        c.query(`SELECT count(*)::int AS n FROM task WHERE status IN ('working','input_required')`),
      );
      expect(live.rows[0].n).toBe(30);
    } finally {
      await Promise.all([x.close(), y.close()]);
      await fresh.drop();
    }
  });

  it('works off a backlog of many batches in one run and keeps the usage counters exact', async () => {
    // 1,200 finished rows past their ttl, 24 batches of 50: more than the 20 batches a run used to stop at.
    await withClient(db.url, (c) =>
      c.query(
        `INSERT INTO task (id, owner_id, era, tool_name, status, created_at, last_updated_at, ttl_ms, expires_at,
                           poll_interval_ms, request_params)
         SELECT 'backlog-' || g, 'backlog-owner', 'modern', 'slow_tool', 'completed', now() - interval '2 hours',
                now() - interval '2 hours', 1000, now() - interval '1 hour', 1000, '{}'
           FROM generate_series(1, 1200) g`,
      ),
    );
    const r = await a.get(JanitorService).runOnce();
    expect(r.result).toBe('ok');
    expect(r.rows.delete).toBeGreaterThanOrEqual(1200);
    const left = await withClient(db.url, async (c) => {
      const rows = await c.query(`SELECT count(*)::int AS n FROM task WHERE owner_id = 'backlog-owner'`);
      const usage = await c.query(
        `SELECT coalesce(sum(retained), 0)::int AS n FROM task_usage WHERE owner_id = 'backlog-owner'`,
      );
      return { rows: rows.rows[0].n, counted: usage.rows[0].n };
    });
    expect(left).toEqual({ rows: 0, counted: 0 });
  });
});
