import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { runCli } from '../cli/cli.js';
import { InstancesService } from '../instances/instances.service.js';
import { JanitorService } from '../janitor/janitor.service.js';
import { requestContext } from '../logging/request-context.js';
import { principalIdFor } from '../principals/principals.service.js';
import { TaskCreationRepository } from '../tasks/store/task-creation.repository.js';
import { McpTool, type ToolContext } from '../tool-dispatch/index.js';
import { responseOf, rpc, type RpcAnswer } from '../../test/support/mcp-http.js';
import { newTaskRow } from '../../test/support/task-registry.js';
import { asUser, LegacyClient, modern, PROXY_SECRET, waitFor } from '../../test/support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';

/** The runs of day_report still working, by their `hold` argument: the test finishes each by hand. */
const held = new Map<string, () => void>();

/** Finishes the run of day_report holding `name` (once it has started). */
async function release(name: string): Promise<void> {
  await waitFor(
    async () => held.get(name),
    (finish) => finish !== undefined,
    { what: `the run holding ${name}`, timeoutMs: 10000 },
  );
  held.get(name)!();
  held.delete(name);
}

@Injectable()
class DayTools {
  @McpTool({
    name: 'day_report',
    description: 'A report that runs as a task until the test releases it (or it is cancelled).',
    input: { type: 'object', properties: { hold: { type: 'string' } }, required: ['hold'] },
    taskSupport: 'required',
  })
  report(args: { hold: string }, ctx: ToolContext): Promise<string> {
    return new Promise((resolve) => {
      held.set(args.hold, () => resolve(`report ${args.hold}`));
      ctx.signal.addEventListener('abort', () => resolve('aborted'));
    });
  }

  @McpTool({
    name: 'day_admin',
    description: 'Needs reports:admin.',
    input: { type: 'object' },
    scopes: ['reports:admin'],
  })
  admin(): string {
    return 'admin';
  }
}

@Module({ providers: [DayTools] })
class DayToolsModule {}

/** An exported audit row (`audit export`, JSON lines). */
interface Exported {
  id: string;
  at: string;
  kind: string;
  actor: string;
  principal: string | null;
  taskId: string | null;
  sessionId: string | null;
  tool: string | null;
  era: string | null;
  status: string | null;
  previousStatus: string | null;
  attempt: number | null;
  instanceId: string | null;
  traceId: string | null;
  requestId: string | null;
  detail: Record<string, unknown> | null;
}

/**
 * Issue 23, "Done when" 1: the audit rows of a scripted day on real PostgreSQL, checked one by one. The real
 * AppModule over real HTTP (both eras, SSO proxy and API key callers), the admin CLI for the operator's
 * actions, the janitor for an expiry and a rescue; every run's work is held by a ControlledExecutor, so
 * each step settles before the next one starts and the day's rows come out in a known order. The rows are
 * read back the way a SIEM would: `audit export`.
 */
describe('the audit trail of a scripted day (real PostgreSQL, real HTTP, the CLI, the janitor)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;
  let me: string;
  const alice = principalIdFor({ provider: 'proxy', subject: 'alice' });

  async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(
      argv,
      { DATABASE_URL: db.url, LOG_LEVEL: 'error' },
      { out: (l) => out.push(l), err: (l) => err.push(l) },
    );
    return { code, out: out.join('\n'), err: err.join('\n') };
  }

  const kindsOf = async (taskId: string): Promise<string[]> =>
    withClient(db.url, async (c) =>
      (
        await c.query<{ kind: string }>('SELECT kind FROM mcp_audit_event WHERE task_id = $1 ORDER BY id', [
          taskId,
        ])
      ).rows.map((r) => r.kind),
    );
  const settled = (taskId: string, kinds: string[]) =>
    waitFor(
      () => kindsOf(taskId),
      (k) => k.length === kinds.length,
      { what: `${kinds.join(', ')} of ${taskId}`, timeoutMs: 10000 },
    );

  const result = (answer: RpcAnswer): any => {
    const response = responseOf(answer);
    if (!response || !('result' in response)) throw new Error(`${answer.status} ${answer.text}`);
    return response.result;
  };

  beforeAll(async () => {
    db = await createTestDatabase('audit_day');
    app = await createTestApp(
      db.url,
      {
        AUTH_PROVIDERS: 'proxy,apikey',
        AUTH_PROXY_SECRET: PROXY_SECRET,
        JANITOR_ENABLED: 'false',
      },
      [DayToolsModule],
    );
    url = await loopbackUrl(app, '/mcp');
    me = app.get(InstancesService).instanceId;
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('records every change of the day, by whom, in order', async () => {
    // 08:00 The operator creates a key for the nightly job.
    const created = await cli('--operator', 'ops:olga', 'apikey', 'create', '--name', 'nightly', '--json');
    expect(created.code).toBe(0);
    const key = JSON.parse(created.out) as { id: string; key: string };
    const bot = `apikey:${key.id}`;
    const asBot = { authorization: `Bearer ${key.key}` };

    // 09:00 Alice, on a 2025-11-25 client, opens a session and runs a report as a task; it completes.
    const session = await LegacyClient.open(url, {}, asUser('alice'));
    const t1 = (await session.createTask('day_report', { hold: 't1' })).taskId;
    await release('t1');
    await settled(t1, ['task.created', 'task.completed']);

    // 10:00 On a 2026-07-28 client she starts another and cancels it herself.
    const t2 = result(
      await modern(
        url,
        'tools/call',
        { name: 'day_report', arguments: { hold: 't2' } },
        { headers: asUser('alice') },
      ),
    ).taskId as string;
    expect(
      result(await modern(url, 'tasks/cancel', { taskId: t2 }, { headers: asUser('alice') })),
    ).toMatchObject({ resultType: 'complete' });
    await settled(t2, ['task.created', 'task.cancelled']);

    // 11:00 The nightly job starts a report; the operator cancels it from the CLI.
    const started = result(
      await modern(url, 'tools/call', { name: 'day_report', arguments: { hold: 't3' } }, { headers: asBot }),
    );
    // The whole answer when it is not a task handle, and the CLI's stderr when it refuses: a failure says why.
    expect(started).toMatchObject({ resultType: 'task', taskId: expect.any(String) });
    const t3 = started.taskId as string;
    expect(await cli('tasks', 'cancel', t3, '--operator', 'ops:olga')).toMatchObject({ code: 0, err: '' });
    await settled(t3, ['task.created', 'task.cancelled']);

    // 12:00 A report of Alice's outlives its ttl: the janitor expires it.
    const t4 = result(
      await modern(
        url,
        'tools/call',
        { name: 'day_report', arguments: { hold: 't4' } },
        { headers: asUser('alice') },
      ),
    ).taskId as string;
    await withClient(db.url, (c) =>
      c.query(`UPDATE task SET expires_at = now() - interval '1 second' WHERE id = $1`, [t4]),
    );
    await app.get(JanitorService).runOnce();
    await release('t4'); // too late: the expiry fenced the run off, so its result records nothing
    await settled(t4, ['task.created', 'task.expired']);

    // 13:00 Another replica took a resumable task of the nightly job and died with it: the janitor rescues
    // it (re-queued), this instance claims it as its second attempt and completes it.
    const gone = randomUUID();
    const t5 = (
      await requestContext.run({ requestId: 'req-replica', principalId: bot }, () =>
        app.get(TaskCreationRepository).insertWithLimits(
          {
            ...newTaskRow(gone, bot, 60000, { name: 'day_report', arguments: { hold: 't5' } }),
            toolName: 'day_report',
            resumable: true,
            maxAttempts: 3,
          },
          { maxPerOwner: 100, maxTotal: 100, maxRetainedPerOwner: 100 },
        ),
      )
    ).id;
    await app.get(JanitorService).runOnce();
    await release('t5');
    await settled(t5, ['task.created', 'task.rescued', 'task.attempt', 'task.completed']);

    // 17:00 The key is revoked; the job's next request is refused (401, not an audit row: no principal).
    expect(await cli('apikey', 'revoke', key.id, '--operator', 'ops:olga')).toMatchObject({ code: 0 });
    expect((await modern(url, 'tools/list', {}, { headers: asBot })).status).toBe(401);

    // 17:30 Alice tries an admin tool without its scope.
    const refused = await modern(
      url,
      'tools/call',
      { name: 'day_admin', arguments: {} },
      {
        headers: asUser('alice'),
      },
    );
    expect(refused.status).toBe(403);
    await waitFor(
      async () =>
        (
          await withClient(db.url, (c) =>
            c.query(`SELECT 1 FROM mcp_audit_event WHERE kind = 'auth.scope_refused'`),
          )
        ).rowCount,
      (n) => n === 1,
      { what: 'the refusal row' },
    );

    // 18:00 She closes her session.
    expect((await rpc(url, undefined, session.headers(), 'DELETE')).status).toBe(200);

    // The day as `audit export` gives it to a SIEM.
    const exported = await cli('audit', 'export');
    expect(exported.code).toBe(0);
    const rows = exported.out.split('\n').map((l) => JSON.parse(l) as Exported);
    const keyDetail = { keyId: key.id, name: 'nightly', scopes: [], keyPrincipal: bot, via: 'cli' };
    const task = (
      taskId: string,
      era: 'legacy' | 'modern',
      principal: string,
      sessionId: string | null = null,
    ) => ({
      taskId,
      era,
      tool: 'day_report',
      principal,
      sessionId,
    });
    const expected: Partial<Exported>[] = [
      // 08:00
      {
        kind: 'api_key.created',
        actor: 'operator',
        principal: 'ops:olga',
        instanceId: null,
        detail: keyDetail,
      },
      // 09:00
      {
        kind: 'session.opened',
        actor: 'owner',
        principal: alice,
        sessionId: session.sessionId,
        era: 'legacy',
        instanceId: me,
        detail: { protocolVersion: '2025-11-25', clientName: 'e2e' },
      },
      {
        kind: 'task.created',
        actor: 'owner',
        ...task(t1, 'legacy', alice, session.sessionId),
        status: 'working',
        previousStatus: null,
        attempt: 1,
        instanceId: me,
        detail: expect.objectContaining({
          argumentBytes: Buffer.byteLength('{"hold":"t1"}'),
          argumentSha256: expect.stringMatching(/^[0-9a-f]{64}$/),
        }),
      },
      {
        kind: 'task.completed',
        actor: 'worker',
        ...task(t1, 'legacy', alice, session.sessionId),
        status: 'completed',
        previousStatus: 'working',
        detail: expect.objectContaining({ resultBytes: expect.any(Number) }),
      },
      // 10:00
      { kind: 'task.created', actor: 'owner', ...task(t2, 'modern', alice) },
      {
        kind: 'task.cancelled',
        actor: 'owner',
        ...task(t2, 'modern', alice),
        status: 'cancelled',
        previousStatus: 'working',
        detail: null,
      },
      // 11:00
      { kind: 'task.created', actor: 'owner', ...task(t3, 'modern', bot) },
      {
        kind: 'task.cancelled',
        actor: 'operator',
        ...task(t3, 'modern', 'ops:olga'),
        status: 'cancelled',
        previousStatus: 'working',
        instanceId: null,
        requestId: null,
        detail: { owner: bot, via: 'cli' },
      },
      // 12:00
      { kind: 'task.created', actor: 'owner', ...task(t4, 'modern', alice) },
      {
        kind: 'task.expired',
        actor: 'janitor',
        ...task(t4, 'modern', alice),
        status: 'failed',
        previousStatus: 'working',
        instanceId: me,
        requestId: null,
      },
      // 13:00
      { kind: 'task.created', actor: 'owner', ...task(t5, 'modern', bot), requestId: 'req-replica' },
      {
        kind: 'task.rescued',
        actor: 'janitor',
        ...task(t5, 'modern', bot),
        status: 'working',
        attempt: 2,
        detail: expect.objectContaining({ outcome: 'requeued', lostAttempt: 1 }),
      },
      { kind: 'task.attempt', actor: 'worker', ...task(t5, 'modern', bot), attempt: 2 },
      {
        kind: 'task.completed',
        actor: 'worker',
        ...task(t5, 'modern', bot),
        status: 'completed',
        attempt: 2,
      },
      // 17:00
      {
        kind: 'api_key.revoked',
        actor: 'operator',
        principal: 'ops:olga',
        instanceId: null,
        detail: keyDetail,
      },
      // 17:30
      {
        kind: 'auth.scope_refused',
        actor: 'owner',
        principal: alice,
        tool: 'day_admin',
        era: 'modern',
        instanceId: me,
        requestId: expect.any(String),
        detail: { missing: ['reports:admin'], route: 'tools/call' },
      },
      // 18:00
      {
        kind: 'session.ended',
        actor: 'owner',
        principal: alice,
        sessionId: session.sessionId,
        era: 'legacy',
        instanceId: me,
        requestId: expect.any(String),
        detail: { reason: 'client' },
      },
    ];
    expect(rows.map((r) => `${r.kind}:${r.actor}:${r.taskId ?? '-'}`)).toEqual(
      expected.map((r) => `${r.kind}:${r.actor}:${r.taskId ?? '-'}`),
    );
    rows.forEach((row, i) => expect(row).toMatchObject(expected[i]));
    // Each caller's row carries the id of the request it came in; the janitor serves no request.
    for (const row of rows) {
      if (row.actor === 'owner') expect(row.requestId).toEqual(expect.any(String));
      if (row.actor === 'janitor') expect(row.requestId).toBeNull();
    }
  });
});
