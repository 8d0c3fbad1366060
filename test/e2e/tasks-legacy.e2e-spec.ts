import type { INestApplication } from '@nestjs/common';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { TASK_CANCELLED_CODE } from '../../src/tasks/mcp/legacy/legacy-tasks.methods.js';
import { LEGACY, rpc } from '../support/mcp-http.js';
import {
  asUser,
  freshUser,
  LegacyClient,
  nextMatching,
  PROXY_SECRET,
  RELATED_TASK,
  waitFor,
} from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const MAX_TTL_MS = 120000;
const PAGE_SIZE = 2;
const MAX_PER_OWNER = 3;

/**
 * The 2025-11-25 task protocol over real HTTP: the real AppModule with the conformance fixtures, behind the
 * SSO proxy strategy so each test is its own principal (and starts with no tasks).
 */
describe('tasks in the 2025-11-25 era (real HTTP)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;

  const client = (caps: Record<string, unknown> = {}, user = freshUser()) =>
    LegacyClient.open(url, caps, asUser(user));

  async function statusOf(c: LegacyClient, taskId: string): Promise<string> {
    return (await c.result('tasks/get', { taskId })).status;
  }

  beforeAll(async () => {
    db = await createTestDatabase('tasks_legacy');
    app = await createTestApp(db.url, {
      MCP_CONFORMANCE_FIXTURES: 'true',
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      TASK_MAX_TTL_MS: String(MAX_TTL_MS),
      TASK_LIST_PAGE_SIZE: String(PAGE_SIZE),
      TASK_MAX_PER_OWNER: String(MAX_PER_OWNER),
      TASK_POLL_INTERVAL_MS: '250',
    });
    url = await loopbackUrl(app, '/mcp');
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('advertises the tasks capability in initialize and execution.taskSupport in tools/list', async () => {
    const init = await rpc(
      url,
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'e2e', version: '1' } },
      },
      asUser(freshUser()),
    );
    expect(init.status).toBe(200);
    expect(init.json.result.protocolVersion).toBe(LEGACY);
    expect(init.json.result.capabilities.tasks).toEqual({
      list: {},
      cancel: {},
      requests: { tools: { call: {} } },
    });

    const c = await client();
    const { tools } = await c.result('tools/list');
    const support = Object.fromEntries(
      (tools as { name: string; execution?: { taskSupport: string } }[]).map((t) => [
        t.name,
        t.execution?.taskSupport ?? 'absent',
      ]),
    );
    expect(support).toMatchObject({
      greet: 'absent',
      slow_compute: 'optional',
      failing_job: 'required',
      protocol_error_job: 'optional',
      confirm_delete: 'optional',
      multi_input: 'optional',
      test_tool_with_task: 'required',
    });
  });

  it('answers tools/call with params.task at once with a working task that tasks/get finds right after', async () => {
    const c = await client();
    const started = Date.now();
    const answer = await c.call('tools/call', {
      name: 'slow_compute',
      arguments: { seconds: 5, label: 'x' },
      task: {},
    });
    expect(Date.now() - started).toBeLessThan(2000);
    const task = answer.result.task;
    expect(Object.keys(answer.result)).toEqual(['task']);
    expect(task).toEqual({
      taskId: expect.stringMatching(/^[A-Za-z0-9_-]{24}$/),
      status: 'working',
      createdAt: expect.any(String),
      lastUpdatedAt: expect.any(String),
      ttl: MAX_TTL_MS, // the default (1 h) clamped to TASK_MAX_TTL_MS
      pollInterval: 250,
    });
    const got = await c.result('tasks/get', { taskId: task.taskId });
    expect(got).toMatchObject({ taskId: task.taskId, status: 'working', ttl: MAX_TTL_MS, pollInterval: 250 });
    expect(new Date(got.createdAt).toISOString()).toBe(got.createdAt);
    await c.result('tasks/cancel', { taskId: task.taskId });
  });

  it('grants a requested ttl below the maximum and clamps one above it to TASK_MAX_TTL_MS', async () => {
    const c = await client();
    const small = await c.createTask('slow_compute', { seconds: 0 }, { ttl: 5000 });
    expect(small.ttl).toBe(5000);
    const big = await c.createTask('slow_compute', { seconds: 0 }, { ttl: MAX_TTL_MS * 10 });
    expect(big.ttl).toBe(MAX_TTL_MS);
    expect((await c.result('tasks/get', { taskId: big.taskId })).ttl).toBe(MAX_TTL_MS);
    const bad = await c.call('tools/call', {
      name: 'slow_compute',
      arguments: { seconds: 0 },
      task: { ttl: -1 },
    });
    expect(bad.error.code).toBe(-32602);
  });

  it('refuses a required tool without a task and a task on a forbidden tool with -32601', async () => {
    const c = await client();
    const required = await c.call('tools/call', { name: 'failing_job', arguments: {} });
    expect(required.error.code).toBe(-32601);
    const forbidden = await c.call('tools/call', { name: 'greet', arguments: { name: 'Ada' }, task: {} });
    expect(forbidden.error.code).toBe(-32601);
    // Neither created a task.
    expect((await c.result('tasks/list')).tasks).toEqual([]);
    // The forbidden tool still runs inline, and an optional one without a task too.
    const inline = await c.result('tools/call', { name: 'greet', arguments: { name: 'Ada' } });
    expect(inline.content[0].text).toBe('Hello, Ada!');
  });

  it('tasks/result blocks until the task completes and returns exactly the tool result with related-task _meta', async () => {
    const c = await client();
    const inline = await c.result('tools/call', {
      name: 'slow_compute',
      arguments: { seconds: 0, label: 'L' },
    });
    const task = await c.createTask('slow_compute', { seconds: 1, label: 'L' });
    const started = Date.now();
    const result = await c.result('tasks/result', { taskId: task.taskId });
    expect(Date.now() - started).toBeGreaterThan(500);
    const { _meta, ...rest } = result;
    expect(_meta).toEqual({ ...(inline._meta ?? {}), [RELATED_TASK]: { taskId: task.taskId } });
    const { _meta: _inlineMeta, ...inlineRest } = inline;
    expect(rest).toEqual({ ...inlineRest, content: [{ type: 'text', text: 'Computed L after 1 s' }] });
    expect(await statusOf(c, task.taskId)).toBe('completed');
    // Asking again replays the same result.
    expect(await c.result('tasks/result', { taskId: task.taskId })).toEqual(result);
  });

  it('a tool error result ends the task failed, and tasks/result returns the isError result', async () => {
    const c = await client();
    const task = await c.createTask('failing_job');
    const result = await c.result('tasks/result', { taskId: task.taskId });
    expect(result.isError).toBe(true);
    expect(result.content[0].text).toContain('failing_job failed on purpose');
    expect(result._meta[RELATED_TASK]).toEqual({ taskId: task.taskId });
    const got = await c.result('tasks/get', { taskId: task.taskId });
    expect(got.status).toBe('failed');
    expect(got.statusMessage).toContain('failing_job failed on purpose');
  });

  it('a protocol error ends the task failed and tasks/result returns that JSON-RPC error', async () => {
    const c = await client();
    const task = await c.createTask('protocol_error_job');
    const response = await c.call('tasks/result', { taskId: task.taskId });
    expect(response.result).toBeUndefined();
    expect(response.error).toEqual({ code: -32603, message: 'protocol_error_job failed on purpose' });
    expect(await statusOf(c, task.taskId)).toBe('failed');
  });

  it('tasks/result of a cancelled task is the documented error, and wakes within moments of a cancel from another request', async () => {
    const c = await client();
    const task = await c.createTask('slow_compute', { seconds: 30 });
    let answeredAt = 0;
    const waiting = c.call('tasks/result', { taskId: task.taskId }).then((r) => {
      answeredAt = Date.now();
      return r;
    });
    // Give the waiter time to arm (it must be blocked, not answered).
    await new Promise((r) => setTimeout(r, 400));
    expect(answeredAt).toBe(0);
    const cancelledAt = Date.now();
    const cancelled = await c.result('tasks/cancel', { taskId: task.taskId });
    expect(cancelled).toMatchObject({ taskId: task.taskId, status: 'cancelled' });
    const response = await waiting;
    expect(answeredAt - cancelledAt).toBeLessThan(1000);
    expect(response.error).toEqual({
      code: TASK_CANCELLED_CODE,
      message: 'Task was cancelled',
      data: { taskId: task.taskId, status: 'cancelled' },
    });
    // A later call gets the same error at once.
    expect((await c.call('tasks/result', { taskId: task.taskId })).error.code).toBe(TASK_CANCELLED_CODE);
  });

  it('tasks/cancel returns the cancelled task for a live one and -32602 for a terminal one', async () => {
    const c = await client();
    const task = await c.createTask('slow_compute', { seconds: 30 });
    const cancelled = await c.result('tasks/cancel', { taskId: task.taskId });
    expect(cancelled).toEqual({
      taskId: task.taskId,
      status: 'cancelled',
      statusMessage: 'The task was cancelled by request.',
      createdAt: task.createdAt,
      lastUpdatedAt: expect.any(String),
      ttl: task.ttl,
      pollInterval: task.pollInterval,
    });
    const again = await c.call('tasks/cancel', { taskId: task.taskId });
    expect(again.error).toEqual({
      code: -32602,
      message: "Cannot cancel task: already in terminal status 'cancelled'",
    });
    const done = await c.createTask('slow_compute', { seconds: 0 });
    await waitFor(
      () => statusOf(c, done.taskId),
      (s) => s === 'completed',
    );
    const late = await c.call('tasks/cancel', { taskId: done.taskId });
    expect(late.error).toEqual({
      code: -32602,
      message: "Cannot cancel task: already in terminal status 'completed'",
    });
    expect(await statusOf(c, done.taskId)).toBe('completed');
    const unknown = await c.call('tasks/get', { taskId: 'A'.repeat(24) });
    expect(unknown.error).toEqual({ code: -32602, message: 'Task not found' });
  });

  it('tasks/list shows only the caller’s tasks, newest first, paginated, and refuses a bad cursor', async () => {
    const me = await client();
    const other = await client();
    const theirs = await other.createTask('slow_compute', { seconds: 0 });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      // One at a time, each finished before the next: TASK_MAX_PER_OWNER (3) counts live tasks.
      const t = await me.createTask('slow_compute', { seconds: 0 });
      await waitFor(
        () => statusOf(me, t.taskId),
        (s) => s === 'completed',
      );
      ids.push(t.taskId);
    }

    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await me.result('tasks/list', cursor ? { cursor } : {});
      pages++;
      expect(page.tasks.length).toBeLessThanOrEqual(PAGE_SIZE);
      for (const t of page.tasks) {
        expect(t).toEqual(expect.objectContaining({ taskId: expect.any(String), ttl: expect.any(Number) }));
        seen.push(t.taskId);
      }
      cursor = page.nextCursor;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual([...ids].reverse());
    expect(seen).not.toContain(theirs.taskId);
    expect((await other.result('tasks/list')).tasks.map((t: { taskId: string }) => t.taskId)).toEqual([
      theirs.taskId,
    ]);

    for (const bad of ['not-a-cursor', 'eyJ4IjoxfQ', '']) {
      const response = await me.call('tasks/list', { cursor: bad });
      expect(response.error?.code).toBe(-32602);
    }
    expect((await me.call('tasks/list', { cursor: 42 })).error.code).toBe(-32602);
  });

  it('refuses a creation past TASK_MAX_PER_OWNER with an error naming the limit; finished tasks do not count', async () => {
    const c = await client();
    const done = await c.createTask('slow_compute', { seconds: 0 });
    await waitFor(
      () => statusOf(c, done.taskId),
      (s) => s === 'completed',
    );
    const live: string[] = [];
    for (let i = 0; i < MAX_PER_OWNER; i++)
      live.push((await c.createTask('slow_compute', { seconds: 30 })).taskId);
    const refused = await c.call('tools/call', {
      name: 'slow_compute',
      arguments: { seconds: 30 },
      task: {},
    });
    expect(refused.error.code).toBe(-32000);
    expect(refused.error.message).toContain('TASK_MAX_PER_OWNER');
    // Another principal is not affected by this one's limit.
    const other = await client();
    const theirs = await other.createTask('slow_compute', { seconds: 0 });
    expect(theirs.status).toBe('working');
    // Once one finishes, there is room again.
    await c.result('tasks/cancel', { taskId: live[0] });
    const next = await c.createTask('slow_compute', { seconds: 30 });
    for (const id of [...live.slice(1), next.taskId]) await c.result('tasks/cancel', { taskId: id });
  });

  it('sends notifications/tasks/status on the session’s GET stream at each transition, replayable with Last-Event-ID', async () => {
    const c = await client();
    const stream = await c.openGetStream();
    expect(stream.status).toBe(200);
    const priming = await stream.next();
    expect(priming.id).toBeDefined();
    const task = await c.createTask('slow_compute', { seconds: 1 });
    const isStatus = (ev: { json?: any }) => ev.json?.method === 'notifications/tasks/status';
    const { event: completed, seen } = await nextMatching(
      stream,
      (ev) => isStatus(ev) && ev.json.params.status === 'completed',
    );
    stream.close();
    const statuses = seen.filter(isStatus).map((ev) => ev.json.params);
    expect(statuses.every((p) => p.taskId === task.taskId)).toBe(true);
    expect(statuses.map((p) => p.status)).toEqual(['working', 'completed']);
    expect(statuses[1]).toMatchObject({
      ttl: task.ttl,
      pollInterval: task.pollInterval,
      createdAt: task.createdAt,
    });
    expect(completed.id).toMatch(/_\d+$/);

    // A cancelled task notifies too; replay from the priming event gives back every event since.
    const second = await c.createTask('slow_compute', { seconds: 30 });
    await c.result('tasks/cancel', { taskId: second.taskId });
    const replay = await c.openGetStream(priming.id);
    expect(replay.status).toBe(200);
    const replayed = await nextMatching(
      replay,
      (ev) =>
        isStatus(ev) && ev.json.params.taskId === second.taskId && ev.json.params.status === 'cancelled',
    );
    replay.close();
    const replayedStatuses = replayed.seen
      .filter(isStatus)
      .map((ev) => `${ev.json.params.taskId === task.taskId ? 'first' : 'second'}:${ev.json.params.status}`);
    expect(replayedStatuses).toEqual([
      'first:working',
      'first:completed',
      'second:working',
      'second:cancelled',
    ]);
    expect(replayed.seen[0].id).not.toBe(priming.id);
  });

  it('asks for elicitation on the GET stream with related-task _meta while input_required, then completes', async () => {
    const c = await client({ elicitation: {} });
    const stream = await c.openGetStream();
    await stream.next(); // priming
    const task = await c.createTask('confirm_delete', { filename: 'report.txt' });
    const { event: ask, seen } = await nextMatching(stream, (ev) => ev.json?.method === 'elicitation/create');
    expect(ask.json.id).toEqual(expect.any(String));
    expect(ask.json.params).toMatchObject({
      mode: 'form',
      message: 'Delete report.txt?',
      requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean' } } },
      _meta: { [RELATED_TASK]: { taskId: task.taskId } },
    });
    await waitFor(
      () => statusOf(c, task.taskId),
      (s) => s === 'input_required',
      { what: 'input_required' },
    );
    const answered = await rpc(
      url,
      {
        jsonrpc: '2.0',
        id: ask.json.id,
        result: {
          action: 'accept',
          content: { confirm: true },
          _meta: { [RELATED_TASK]: { taskId: task.taskId } },
        },
      },
      c.headers(),
    );
    expect(answered.status).toBe(202);
    const result = await c.result('tasks/result', { taskId: task.taskId });
    expect(result.content).toEqual([{ type: 'text', text: 'Deleted report.txt' }]);
    expect(await statusOf(c, task.taskId)).toBe('completed');
    const rest = await nextMatching(
      stream,
      (ev) => ev.json?.method === 'notifications/tasks/status' && ev.json.params.status === 'completed',
    );
    stream.close();
    const statuses = [...seen, ...rest.seen]
      .filter((ev) => ev.json?.method === 'notifications/tasks/status')
      .map((ev) => ev.json.params.status);
    expect(statuses).toEqual(['working', 'input_required', 'working', 'completed']);
  });

  it('a tool that needs elicitation fails the task when the client did not declare it', async () => {
    const c = await client();
    const task = await c.createTask('confirm_delete', { filename: 'x' });
    const result = await c.result('tasks/result', { taskId: task.taskId });
    expect(result.isError).toBe(true);
    expect(result.content[0].text).toBe(
      'The client did not declare the elicitation capability, so elicitation/create cannot be sent',
    );
    const got = await c.result('tasks/get', { taskId: task.taskId });
    expect(got.status).toBe('failed');
  });

  it('works end to end with the @modelcontextprotocol/sdk 1.x client’s experimental tasks API', async () => {
    const user = freshUser('sdk');
    const transport = new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: asUser(user) },
    });
    const sdk = new Client({ name: 'sdk-e2e', version: '1.0.0' }, { capabilities: {} });
    await sdk.connect(transport);
    try {
      expect(sdk.getServerCapabilities()?.tasks).toEqual({
        list: {},
        cancel: {},
        requests: { tools: { call: {} } },
      });
      const { tools } = await sdk.listTools();
      expect(tools.find((t) => t.name === 'failing_job')?.execution?.taskSupport).toBe('required');

      // callToolStream: the task is created, then the SDK itself polls it to the end and fetches the result.
      const kinds: string[] = [];
      let createdId: string | undefined;
      let final: any;
      for await (const message of sdk.experimental.tasks.callToolStream(
        { name: 'slow_compute', arguments: { seconds: 1, label: 'sdk' } },
        CallToolResultSchema,
        { task: { ttl: 60000 } },
      )) {
        kinds.push(message.type);
        if (message.type === 'taskCreated') createdId = message.task.taskId;
        if (message.type === 'result') final = message.result;
        if (message.type === 'error') throw message.error;
      }
      expect(kinds[0]).toBe('taskCreated');
      expect(kinds[kinds.length - 1]).toBe('result');
      expect(final.content).toEqual([{ type: 'text', text: 'Computed sdk after 1 s' }]);
      expect(createdId).toBeDefined();

      // The same task through the explicit calls.
      const got = await sdk.experimental.tasks.getTask(createdId!);
      expect(got).toMatchObject({ taskId: createdId, status: 'completed', ttl: 60000 });
      const again = await sdk.experimental.tasks.getTaskResult(createdId!, CallToolResultSchema);
      expect(again.content).toEqual(final.content);

      // A second task, polled by hand with getTask, then cancelled with cancelTask.
      const kept: string[] = [];
      for await (const message of sdk.experimental.tasks.callToolStream(
        { name: 'slow_compute', arguments: { seconds: 30 } },
        CallToolResultSchema,
        { task: {} },
      )) {
        if (message.type === 'taskCreated') {
          kept.push(message.task.taskId);
          break;
        }
      }
      const longId = kept[0];
      expect((await sdk.experimental.tasks.getTask(longId)).status).toBe('working');
      const cancelled = await sdk.experimental.tasks.cancelTask(longId);
      expect(cancelled.status).toBe('cancelled');
      const polled = await waitFor(
        () => sdk.experimental.tasks.getTask(longId),
        (t) => t.status === 'cancelled',
      );
      expect(polled.status).toBe('cancelled');

      const listed = await sdk.experimental.tasks.listTasks();
      expect(listed.tasks.map((t) => t.taskId)).toEqual([longId, createdId]);
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await sdk.close();
    }
  });
});
