import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { createHash, randomUUID } from 'node:crypto';
import { createTestApp } from '../../../test/support/test-app.js';
import { canonicalJson } from '../../protocol/canonical-json.js';
import {
  ControlledExecutor,
  metricValue,
  sleep,
  waitFor,
} from '../../../test/support/controlled-executor.js';
import {
  newTaskRow,
  recordCommitGroups,
  type CommitGroupRecord,
} from '../../../test/support/task-registry.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import { asActor } from '../../audit/audit-context.js';
import { InstancesService } from '../../instances/instances.service.js';
import { JanitorRepository } from '../../janitor/janitor.repository.js';
import { JanitorService } from '../../janitor/janitor.service.js';
import { LifecycleService } from '../../lifecycle/lifecycle.service.js';
import { requestContext } from '../../logging/request-context.js';
import { McpTool } from '../../tool-dispatch/index.js';
import { TaskCreationRepository } from './task-creation.repository.js';
import { TaskOutcomesRepository } from './task-outcomes.repository.js';
import { redriveOf } from '../execution/task-redrive.js';
import { RetryableFailure } from '../execution/task-retry.js';
import { TaskRunnerService } from '../execution/task-runner.service.js';
import type { TaskEra } from '../task.types.js';
import { TasksAdminRepository } from './tasks-admin.repository.js';
import { TasksService } from '../registry/tasks.service.js';
import { TaskCreationService, type CreateTaskInput } from '../execution/task-creation.service.js';
import { TaskCommitGroups } from './task-commit-groups.js';

const ENV = {
  JANITOR_ENABLED: 'false',
  TASK_EXPIRED_GRACE_MS: '0',
  TASK_LEASE_MS: '1500',
  JANITOR_BATCH_SIZE: '50',
};
const LIMITS = { maxPerOwner: 100, maxTotal: 1000, maxRetainedPerOwner: 1000 };

/** A tool that opts two argument fields and one result field into the audit trail. */
@Injectable()
class AuditedTools {
  @McpTool({
    name: 'audited_tool',
    description: 'declares audited fields',
    taskSupport: 'optional',
    input: {
      type: 'object',
      properties: { path: { type: 'string' }, note: { type: 'string' }, body: { type: 'string' } },
    },
    output: { type: 'object', properties: { count: { type: 'number' }, text: { type: 'string' } } },
    audit: { arguments: ['path', 'note'], result: ['count'] },
  })
  run(): Record<string, unknown> {
    return { count: 0, text: '' };
  }
}
@Module({ providers: [AuditedTools] })
class AuditedToolsModule {}

/** Size and hash as the trail documents them: of the canonical JSON (keys sorted). */
const bytes = (v: unknown): number => Buffer.byteLength(canonicalJson(v));
const sha256 = (v: unknown): string => createHash('sha256').update(canonicalJson(v)).digest('hex');

/**
 * The task rows of the audit trail on real PostgreSQL: each kind written in the transaction that makes the
 * change, with who acted (owner through a request, worker, janitor, operator), the task's principal, tool,
 * era, status and attempt, and the detail each kind carries; nothing when the change rolls back.
 */
describe('task audit trail (real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let exec: ControlledExecutor;
  let me: string;

  beforeAll(async () => {
    db = await createTestDatabase('task_audit');
    exec = new ControlledExecutor();
    app = await createTestApp(db.url, ENV, [AuditedToolsModule], { taskWork: exec });
    me = app.get(InstancesService).instanceId;
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  const rowsOf = async (taskId: string) =>
    withClient(db.url, async (c) => {
      const r = await c.query(
        `SELECT kind, actor, principal, task_id, tool, era, status, previous_status, attempt, instance_id,
                request_id, detail
           FROM mcp_audit_event WHERE task_id = $1 ORDER BY id`,
        [taskId],
      );
      return r.rows as Record<string, unknown>[];
    });
  const kindsOf = async (taskId: string) =>
    (await rowsOf(taskId)).map((r) => `${String(r.kind)}:${String(r.actor)}`);

  const input = (ownerId: string, era: TaskEra, extra: Partial<CreateTaskInput> = {}): CreateTaskInput => ({
    ownerId,
    era,
    toolName: 'audited_tool',
    requestParams: { name: 'audited_tool', arguments: {} },
    ...extra,
  });
  /** Runs `fn` as a request of `principal` would (the context the gateway sets). */
  const asRequest = <T>(principal: string, requestId: string, fn: () => Promise<T>): Promise<T> =>
    requestContext.run({ requestId, principalId: principal }, fn);

  it.each(['modern', 'legacy'] as const)(
    '%s era: created (the owner, sizes, hash and opted-in fields), attempt and completed (the worker)',
    async (era) => {
      const args = { path: '/srv/a', note: 'key Bearer abcdefgh12345', body: 'not for the audit trail' };
      const owner = `oidc:alice-${era}`;
      const t = await asRequest(owner, `req-${era}`, () =>
        app
          .get(TaskCreationService)
          .create(input(owner, era, { requestParams: { name: 'audited_tool', arguments: args } }))
          .then((c) => c.task),
      );
      const run = await exec.run(t.id);
      const result = { content: [{ type: 'text', text: '3' }], structuredContent: { count: 3, text: 'x' } };
      run.complete(result);
      await waitFor(async () => (await rowsOf(t.id)).length === 2);
      const common = { principal: owner, task_id: t.id, tool: 'audited_tool', era, instance_id: me };
      expect(await rowsOf(t.id)).toEqual([
        {
          ...common,
          kind: 'task.created',
          actor: 'owner',
          status: 'working',
          previous_status: null,
          attempt: 1,
          request_id: `req-${era}`,
          detail: {
            argumentBytes: bytes(args),
            argumentSha256: sha256(args),
            arguments: { path: '/srv/a', note: 'key Bearer [REDACTED]' },
            queued: false,
          },
        },
        {
          ...common,
          // The run started from the request, but its outcome is the worker's.
          kind: 'task.completed',
          actor: 'worker',
          status: 'completed',
          previous_status: 'working',
          attempt: 1,
          request_id: expect.any(String),
          detail: {
            resultBytes: bytes(result),
            resultSha256: sha256(result),
            result: { count: 3 },
          },
        },
      ]);
    },
  );

  it('a park and a resume are status changes (worker, then owner), the resume starts a run; a failure keeps only code, size and hash', async () => {
    const owner = 'oidc:parker';
    const t = await asRequest(owner, 'req-p1', () =>
      app
        .get(TaskCreationService)
        .create(input(owner, 'modern'))
        .then((c) => c.task),
    );
    (await exec.run(t.id)).park({ q: { method: 'elicitation/create', params: { message: 'ok?' } } });
    await waitFor(async () => (await app.get(TasksService).get(owner, t.id)).status === 'input_required');
    const parked = await app.get(TasksService).get(owner, t.id);
    await asRequest(owner, 'req-p2', () =>
      app.get(TasksService).submitInput(owner, t.id, { [Object.keys(parked.inputRequests)[0]]: { ok: 1 } }),
    );
    const error = { code: -32001, message: 'secret path /home/p/x not found' };
    (await exec.run(t.id, 1)).fail(error.code, error.message);
    await waitFor(async () => (await rowsOf(t.id)).length === 5);
    const rows = await rowsOf(t.id);
    expect(rows.map((r) => [r.kind, r.actor, r.previous_status, r.status, r.request_id])).toEqual([
      ['task.created', 'owner', null, 'working', 'req-p1'],
      ['task.status', 'worker', 'working', 'input_required', 'req-p1'],
      ['task.status', 'owner', 'input_required', 'working', 'req-p2'],
      ['task.attempt', 'worker', 'input_required', 'working', 'req-p2'],
      ['task.failed', 'worker', 'working', 'failed', 'req-p2'],
    ]);
    expect(rows[3].detail).toEqual({ start: 'resumed' });
    expect(rows[4].detail).toEqual({
      errorCode: -32001,
      errorBytes: bytes(error),
      errorSha256: sha256(error),
    });
    expect(JSON.stringify(rows)).not.toContain('/home/p/x');
  });

  it('a cancel says who: the owner through a request, an operator (principal, via, owner) through asActor', async () => {
    const owner = 'oidc:canceller';
    const tasks = app.get(TasksService);
    const [a, b] = await asRequest(owner, 'req-c', () =>
      Promise.all([
        app
          .get(TaskCreationService)
          .create(input(owner, 'modern'))
          .then((c) => c.task),
        app
          .get(TaskCreationService)
          .create(input(owner, 'legacy'))
          .then((c) => c.task),
      ]),
    );
    await asRequest(owner, 'req-c2', () => tasks.cancel(owner, a.id));
    await asActor({ kind: 'operator', principal: 'cli:carol', via: 'cli' }, () => tasks.cancel(owner, b.id));
    const [ownerCancel] = (await rowsOf(a.id)).filter((r) => r.kind === 'task.cancelled');
    const [opCancel] = (await rowsOf(b.id)).filter((r) => r.kind === 'task.cancelled');
    expect(ownerCancel).toMatchObject({
      actor: 'owner',
      principal: owner,
      request_id: 'req-c2',
      era: 'modern',
      status: 'cancelled',
      previous_status: 'working',
      detail: null,
    });
    expect(opCancel).toMatchObject({
      actor: 'operator',
      principal: 'cli:carol',
      request_id: null,
      era: 'legacy',
      status: 'cancelled',
      detail: { owner, via: 'cli' },
    });
  });

  it('a retry: retry_scheduled (backoff, budget), then the claim is the next attempt, the worker’s', async () => {
    const owner = 'oidc:retrier';
    const t = await asRequest(owner, 'req-r', () =>
      app
        .get(TaskCreationService)
        .create(input(owner, 'modern', { maxAttempts: 3 }))
        .then((c) => c.task),
    );
    (await exec.run(t.id)).throwError(
      new RetryableFailure(
        { code: -32603, message: 'flaky' },
        { initialDelayMs: 50, factor: 1, maxDelayMs: 50 },
      ),
    );
    const second = await exec.run(t.id, 1);
    second.complete();
    await waitFor(async () => (await kindsOf(t.id)).includes('task.completed:worker'));
    const rows = await rowsOf(t.id);
    expect(rows.map((r) => [r.kind, r.actor, r.attempt])).toEqual([
      ['task.created', 'owner', 1],
      ['task.retry_scheduled', 'worker', 2],
      ['task.attempt', 'worker', 2],
      ['task.completed', 'worker', 2],
    ]);
    expect(rows[1].detail).toEqual({
      delayMs: 50,
      availableAt: expect.any(String),
      failedAttempts: 1,
      maxAttempts: 3,
      errorCode: -32603,
    });
    expect(rows[2]).toMatchObject({ previous_status: 'working', status: 'working', request_id: null });
    expect(rows[2].detail).toEqual({ start: 'claimed', waitedMs: expect.any(Number) });
  });

  it('expiry: by the janitor (actor janitor), found by an owner’s read (actor system, not the owner)', async () => {
    const creations = app.get(TaskCreationRepository);
    const sweptOne = await creations.insertWithLimits(
      { ...newTaskRow(me, 'oidc:exp'), toolName: 'audited_tool', ttlMs: 200 },
      LIMITS,
    );
    const readOne = await creations.insertWithLimits(
      { ...newTaskRow(me, 'oidc:exp'), toolName: 'audited_tool', ttlMs: 200 },
      LIMITS,
    );
    await sleep(400);
    await asRequest('oidc:exp', 'req-e', () => app.get(TasksService).get('oidc:exp', readOne.id));
    await app.get(JanitorService).runOnce();
    const [bySweep] = (await rowsOf(sweptOne.id)).filter((r) => r.kind === 'task.expired');
    const [byRead] = (await rowsOf(readOne.id)).filter((r) => r.kind === 'task.expired');
    expect(bySweep).toMatchObject({
      actor: 'janitor',
      principal: 'oidc:exp',
      status: 'failed',
      previous_status: 'working',
      request_id: null,
    });
    expect(byRead).toMatchObject({ actor: 'system', principal: 'oidc:exp', request_id: 'req-e' });
    expect((await kindsOf(sweptOne.id)).filter((k) => k.startsWith('task.failed'))).toEqual([]);
  });

  it('rescue of a lost worker (janitor): requeued for a resumable task, failed for a plain one', async () => {
    const gone = randomUUID(); // an instance that never registered: its tasks' worker is lost
    const creations = app.get(TaskCreationRepository);
    const resumable = await creations.insertWithLimits(
      { ...newTaskRow(gone, 'oidc:res'), toolName: 'audited_tool', resumable: true, maxAttempts: 3 },
      LIMITS,
    );
    const plain = await creations.insertWithLimits(
      { ...newTaskRow(gone, 'oidc:res'), toolName: 'audited_tool' },
      LIMITS,
    );
    await app.get(JanitorService).runOnce();
    const [requeued] = (await rowsOf(resumable.id)).filter((r) => r.kind === 'task.rescued');
    const [failed] = (await rowsOf(plain.id)).filter((r) => r.kind === 'task.rescued');
    expect(requeued).toMatchObject({
      actor: 'janitor',
      principal: 'oidc:res',
      status: 'working',
      attempt: 2,
      detail: { outcome: 'requeued', lostAttempt: 1 },
    });
    expect(failed).toMatchObject({
      actor: 'janitor',
      status: 'failed',
      attempt: 1,
      detail: { outcome: 'failed', lostAttempt: 1 },
    });
    // The re-queued one is claimed here as its next attempt.
    (await exec.run(resumable.id)).complete();
    await waitFor(async () => (await kindsOf(resumable.id)).includes('task.completed:worker'));
    expect(await kindsOf(resumable.id)).toEqual([
      'task.created:system',
      'task.rescued:janitor',
      'task.attempt:worker',
      'task.completed:worker',
    ]);
  });

  it('a redrive by an operator: task.redriven on the old task, task.created of the new one linked back', async () => {
    const owner = 'oidc:redrive';
    const old = await asRequest(owner, 'req-d', () =>
      app
        .get(TaskCreationService)
        .create(input(owner, 'legacy'))
        .then((c) => c.task),
    );
    (await exec.run(old.id)).fail(-32603, 'boom');
    await waitFor(async () => (await kindsOf(old.id)).includes('task.failed:worker'));
    const stored = await app.get(TasksAdminRepository).findById(old.id);
    const fresh = await asActor({ kind: 'operator', principal: 'console:dave', via: 'console' }, () =>
      app.get(TaskCreationRepository).insertWithLimits(redriveOf(stored!, 30000), LIMITS),
    );
    const [redriven] = (await rowsOf(old.id)).filter((r) => r.kind === 'task.redriven');
    expect(redriven).toMatchObject({
      actor: 'operator',
      principal: 'console:dave',
      tool: 'audited_tool',
      era: 'legacy',
      status: null,
      detail: { newTaskId: fresh.id, owner, via: 'console' },
    });
    const [created] = (await rowsOf(fresh.id)).filter((r) => r.kind === 'task.created');
    expect(created).toMatchObject({
      actor: 'operator',
      principal: 'console:dave',
      detail: expect.objectContaining({ redrivenFrom: old.id, queued: true, owner, via: 'console' }),
    });
  });

  it('the janitor deleting a finished task past its retention leaves task.deleted, with its last status', async () => {
    const t = await app
      .get(TaskCreationRepository)
      .insertWithLimits({ ...newTaskRow(me, 'oidc:del'), toolName: 'audited_tool', ttlMs: 200 }, LIMITS);
    await app.get(TasksService).cancel('oidc:del', t.id);
    await sleep(400);
    const report = await app.get(JanitorService).runOnce();
    expect(report.rows.delete).toBeGreaterThanOrEqual(1);
    const [deleted] = (await rowsOf(t.id)).filter((r) => r.kind === 'task.deleted');
    expect(deleted).toMatchObject({
      actor: 'janitor',
      principal: 'oidc:del',
      tool: 'audited_tool',
      era: 'modern',
      status: 'cancelled',
      attempt: 1,
      detail: { createdAt: t.createdAt.toISOString() },
    });
  });

  it("creations and outcomes committed as a group: each row is its own caller's (principal, request)", async () => {
    const groups: CommitGroupRecord[] = [];
    recordCommitGroups(groups, app.get(TaskCommitGroups));
    const creations = app.get(TaskCreationRepository);
    const created = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        asRequest(`oidc:g${i}`, `req-g${i}`, () =>
          creations.insertWithLimits({ ...newTaskRow(me, `oidc:g${i}`), toolName: 'audited_tool' }, LIMITS),
        ),
      ),
    );
    await Promise.all(
      created.map((t, i) =>
        asRequest(`oidc:g${i}`, `req-done${i}`, () =>
          app
            .get(TaskOutcomesRepository)
            .completeIfCurrent({ taskId: t.id, generation: t.generation, instanceId: me }, { n: i }),
        ),
      ),
    );
    // Without groups this test would prove nothing: some creations and some outcomes went together.
    expect(Math.max(...groups.filter((g) => g.kind === 'create').map((g) => g.size))).toBeGreaterThan(1);
    expect(Math.max(...groups.filter((g) => g.kind === 'finish').map((g) => g.size))).toBeGreaterThan(1);
    for (const [i, t] of created.entries()) {
      const rows = await rowsOf(t.id);
      expect(rows.map((r) => [r.kind, r.principal, r.request_id])).toEqual([
        ['task.created', `oidc:g${i}`, `req-g${i}`],
        ['task.completed', `oidc:g${i}`, `req-done${i}`],
      ]);
    }
  });

  it('a keyed creation names its Idempotency-Key; a repeat with the key creates nothing and records nothing', async () => {
    const creations = app.get(TaskCreationRepository);
    const keyed = { ...newTaskRow(me, 'oidc:keyed'), idempotencyKey: 'key-1', requestHash: 'h1' };
    const first = await asRequest('oidc:keyed', 'req-k1', () => creations.insertKeyed(keyed, LIMITS));
    const again = await asRequest('oidc:keyed', 'req-k2', () =>
      creations.insertKeyed({ ...keyed, id: newTaskRow(me, 'x').id }, LIMITS),
    );
    expect(again).toMatchObject({ created: false, task: { id: first.task.id } });
    const rows = await rowsOf(first.task.id);
    expect(rows.map((r) => [r.kind, r.request_id])).toEqual([['task.created', 'req-k1']]);
    expect(rows[0].detail).toMatchObject({ idempotencyKey: 'key-1', queued: false });
  });

  it('a change that rolls back leaves no audit row (a creation refused at COMMIT by its limit)', async () => {
    const owner = 'oidc:limited';
    const creations = app.get(TaskCreationRepository);
    const first = await creations.insertWithLimits(
      { ...newTaskRow(me, owner) },
      { ...LIMITS, maxPerOwner: 1 },
    );
    const refused = { ...newTaskRow(me, owner) };
    await expect(creations.insertWithLimits(refused, { ...LIMITS, maxPerOwner: 1 })).rejects.toMatchObject({
      code: 'LIMIT_EXCEEDED',
    });
    expect(await kindsOf(first.id)).toEqual(['task.created:system']);
    expect(await rowsOf(refused.id)).toEqual([]);
  });

  it('retention: the janitor deletes audit rows past AUDIT_RETENTION_DAYS in batches of JANITOR_BATCH_SIZE', async () => {
    await withClient(db.url, (c) =>
      c.query(
        `INSERT INTO mcp_audit_event (at, kind, actor, task_id)
         SELECT now() - interval '91 days' - g * interval '1 second', 'task.status', 'system', 'old-' || g
           FROM generate_series(1, 120) g`,
      ),
    );
    const count = async (sql: string) =>
      withClient(db.url, async (c) => (await c.query(sql)).rows[0].n as number);
    const newer = await count(
      `SELECT count(*)::int AS n FROM mcp_audit_event WHERE at > now() - interval '90 days'`,
    );
    const repo = app.get(JanitorRepository);
    // One batch takes the oldest JANITOR_BATCH_SIZE (50) rows and no more.
    expect(await repo.deleteAuditBatch(90, 50)).toBe(50);
    // The oldest went first (row g is g seconds older than 91 days).
    expect(
      await count(`SELECT max(substr(task_id, 5)::int) AS n FROM mcp_audit_event WHERE task_id LIKE 'old-%'`),
    ).toBe(70);
    expect(await count(`SELECT count(*)::int AS n FROM mcp_audit_event WHERE task_id LIKE 'old-%'`)).toBe(70);
    const before = await metricValue(app, 'mcp_janitor_audit_rows_deleted_total');
    const report = await app.get(JanitorService).runOnce();
    expect(report.rows.audit).toBe(70);
    expect(await metricValue(app, 'mcp_janitor_audit_rows_deleted_total')).toBe(before + 70);
    expect(await count(`SELECT count(*)::int AS n FROM mcp_audit_event WHERE task_id LIKE 'old-%'`)).toBe(0);
    // Rows inside the retention are all kept (the sweep above added its own, so at least as many remain).
    expect(
      await count(`SELECT count(*)::int AS n FROM mcp_audit_event WHERE at > now() - interval '90 days'`),
    ).toBeGreaterThanOrEqual(newer);
  });

  it('with AUDIT_ENABLED=false nothing is recorded', async () => {
    const offExec = new ControlledExecutor();
    const off = await createTestApp(db.url, { ...ENV, AUDIT_ENABLED: 'false' }, [AuditedToolsModule], {
      taskWork: offExec,
    });
    try {
      const t = await asRequest('oidc:off', 'req-off', () =>
        off
          .get(TaskCreationService)
          .create(input('oidc:off', 'modern'))
          .then((c) => c.task),
      );
      (await offExec.run(t.id)).complete();
      await waitFor(async () => (await off.get(TasksService).get('oidc:off', t.id)).status === 'completed');
      expect(await rowsOf(t.id)).toEqual([]);
    } finally {
      await off.close();
    }
  });

  it('a hand-over at the drain is task.handed_over, the worker’s (own app: the drain stops its claimer)', async () => {
    const drainExec = new ControlledExecutor();
    const drained = await createTestApp(
      db.url,
      { ...ENV, SHUTDOWN_GRACE_MS: '60000' },
      [AuditedToolsModule],
      {
        taskWork: drainExec,
      },
    );
    try {
      const here = drained.get(InstancesService).instanceId;
      const t = await drained
        .get(TaskCreationRepository)
        .insertWithLimits(
          { ...newTaskRow(here, 'oidc:drain'), toolName: 'audited_tool', resumable: true, maxAttempts: 3 },
          LIMITS,
        );
      drained.get(TaskRunnerService).start(t);
      const run = await drainExec.run(t.id);
      drained.get(LifecycleService).announceDrain();
      await waitFor(() => run.ctx.signal.aborted, 3000);
      const [handed] = (await rowsOf(t.id)).filter((r) => r.kind === 'task.handed_over');
      expect(handed).toMatchObject({
        actor: 'worker',
        principal: 'oidc:drain',
        instance_id: here,
        status: 'working',
        attempt: 2,
        detail: { handedOverAttempt: 1 },
      });
    } finally {
      await drained.close();
    }
  });
});
