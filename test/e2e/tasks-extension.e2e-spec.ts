import type { INestApplication } from '@nestjs/common';
import { MODERN, openStream, responseOf, type RpcAnswer, type SseEvent } from '../support/mcp-http.js';
import {
  asUser,
  EXT_CAPS,
  freshUser,
  modern,
  nextMatching,
  PROXY_SECRET,
  RELATED_TASK,
  rpcId,
  SUBSCRIPTION_ID,
  TASKS_EXT,
  waitFor,
} from '../support/tasks-e2e.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

const SHORT_TTL_MS = 1500;
const ELICIT = { elicitation: {} };
const REQUIRED_EXTENSION = { requiredCapabilities: { extensions: { [TASKS_EXT]: {} } } };

/**
 * The tasks extension of 2026-07-28 over real HTTP: raw requests with the extension declared (or not) in
 * each request's `_meta` capabilities. Two instances share one database: A with the defaults, B creating
 * short-lived tasks (TASK_DEFAULT_TTL_MS) and sweeping every second, for expiry and cross-instance tests.
 */
describe('tasks extension in the 2026-07-28 era (real HTTP)', () => {
  let db: TestDatabase;
  let a: INestApplication;
  let b: INestApplication;
  let urlA: string;
  let urlB: string;

  /** A caller: one proxied user, talking to instance A unless told otherwise. */
  function caller(user = freshUser()) {
    const headers = asUser(user);
    const send = (
      method: string,
      params: Record<string, unknown> = {},
      opts: { ext?: boolean; caps?: Record<string, unknown>; name?: string; url?: string } = {},
    ): Promise<RpcAnswer> => modern(opts.url ?? urlA, method, params, { ...opts, headers });
    const ok = async (
      method: string,
      params: Record<string, unknown> = {},
      opts: { ext?: boolean; caps?: Record<string, unknown>; url?: string } = {},
    ): Promise<any> => {
      const answer = await send(method, params, opts);
      const response = responseOf(answer);
      if (!response || !('result' in response)) {
        throw new Error(`${method} failed: ${answer.status} ${answer.text}`);
      }
      return response.result;
    };
    const get = (taskId: string, url?: string) => ok('tasks/get', { taskId }, { url });
    const status = async (taskId: string) => (await get(taskId)).status as string;
    const call = (name: string, args: Record<string, unknown> = {}, caps: Record<string, unknown> = {}) =>
      ok('tools/call', { name, arguments: args }, { caps });
    /** Calls a tool that escalates and waits for the task to park as input_required. */
    const parked = async (name: string, args: Record<string, unknown> = {}) => {
      const created = await call(name, args, ELICIT);
      expect(created.resultType).toBe('task');
      return waitFor(
        () => get(created.taskId),
        (t) => t.status === 'input_required',
        { what: `${name} input_required` },
      );
    };
    const listen = async (taskIds: string[], url = urlA, ext = true) => {
      const id = rpcId();
      const stream = await openStream(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': MODERN,
          'mcp-method': 'subscriptions/listen',
          ...headers,
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id,
          method: 'subscriptions/listen',
          params: {
            notifications: { taskIds },
            _meta: {
              'io.modelcontextprotocol/protocolVersion': MODERN,
              'io.modelcontextprotocol/clientCapabilities': ext ? EXT_CAPS : {},
            },
          },
        }),
      });
      return { id, stream };
    };
    return { user, headers, send, ok, get, status, call, parked, listen };
  }

  const errorOf = (answer: RpcAnswer) => responseOf(answer)?.error;

  beforeAll(async () => {
    db = await createTestDatabase('tasks_ext');
    const env = {
      MCP_CONFORMANCE_FIXTURES: 'true',
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      TASK_INLINE_WINDOW_MS: '100',
      TASK_POLL_INTERVAL_MS: '500',
    };
    a = await createTestApp(db.url, env);
    b = await createTestApp(db.url, {
      ...env,
      TASK_DEFAULT_TTL_MS: String(SHORT_TTL_MS),
      JANITOR_INTERVAL_MS: '1000',
    });
    urlA = `${await a.getUrl()}/mcp`;
    urlB = `${await b.getUrl()}/mcp`;
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it('advertises the extension in server/discover and no legacy tasks capability', async () => {
    const result = await caller().ok('server/discover');
    expect(result.resultType).toBe('complete');
    expect(result.capabilities.extensions[TASKS_EXT]).toEqual({});
    expect(result.capabilities.tasks).toBeUndefined();
  });

  it('escalates: a quick call answers inline, a slow one becomes a flat CreateTaskResult that tasks/get finds at once', async () => {
    const c = caller();
    const quick = await c.call('slow_compute', { seconds: 0, label: 'q' });
    expect(quick.resultType).toBe('complete');
    expect(quick.content).toEqual([{ type: 'text', text: 'Computed q after 0 s' }]);
    expect(quick.taskId).toBeUndefined();

    const started = Date.now();
    const created = await c.call('slow_compute', { seconds: 1, label: 's' });
    expect(Date.now() - started).toBeLessThan(900);
    const { _meta: createdMeta, ...fields } = created;
    expect(Object.keys(createdMeta)).toEqual(['io.modelcontextprotocol/serverInfo']);
    expect(Object.keys(fields).sort()).toEqual(
      ['createdAt', 'lastUpdatedAt', 'pollIntervalMs', 'resultType', 'status', 'taskId', 'ttlMs'].sort(),
    );
    expect(created).toMatchObject({
      resultType: 'task',
      status: 'working',
      ttlMs: 3600000,
      pollIntervalMs: 500,
    });
    const got = await c.get(created.taskId);
    expect(got).toMatchObject({
      resultType: 'complete',
      taskId: created.taskId,
      status: 'working',
      ttlMs: 3600000,
    });
    expect(got.ttl).toBeUndefined();
    expect(got.pollInterval).toBeUndefined();
    expect(got.requestState).toBeUndefined();
    const done = await waitFor(
      () => c.get(created.taskId),
      (t) => t.status === 'completed',
    );
    expect(done.result.content).toEqual([{ type: 'text', text: 'Computed s after 1 s' }]);
    expect(done.result._meta?.[RELATED_TASK]).toBeUndefined();
  });

  it('without the extension: an optional tool runs inline, a required one and tasks/* get -32021 with HTTP 400', async () => {
    const c = caller();
    const started = Date.now();
    const inline = await c.ok(
      'tools/call',
      { name: 'slow_compute', arguments: { seconds: 1 } },
      { ext: false },
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(inline).toMatchObject({
      resultType: 'complete',
      content: [{ type: 'text', text: 'Computed result after 1 s' }],
    });

    const required = await c.send('tools/call', { name: 'failing_job', arguments: {} }, { ext: false });
    expect(required.status).toBe(400);
    expect(errorOf(required)).toMatchObject({ code: -32021, data: REQUIRED_EXTENSION });

    // A client that declared only the legacy capability is non-declaring.
    const legacyOnly = await c.send(
      'tools/call',
      { name: 'failing_job', arguments: {} },
      { ext: false, caps: { tasks: { requests: { tools: { call: {} } } } } },
    );
    expect(legacyOnly.status).toBe(400);
    expect(errorOf(legacyOnly).code).toBe(-32021);

    const task = await c.call('slow_compute', { seconds: 30 });
    for (const [method, params] of [
      ['tasks/get', { taskId: task.taskId }],
      ['tasks/update', { taskId: task.taskId, inputResponses: {} }],
      ['tasks/cancel', { taskId: task.taskId }],
    ] as const) {
      const answer = await c.send(method, params, { ext: false });
      expect(answer.status).toBe(400);
      expect(errorOf(answer)).toEqual({
        code: -32021,
        message: 'Missing required client capability',
        data: REQUIRED_EXTENSION,
      });
    }
    // Nothing was cancelled by the refused request.
    expect(await c.status(task.taskId)).toBe('working');
    await c.ok('tasks/cancel', { taskId: task.taskId });
  });

  it('ignores a legacy task param', async () => {
    const c = caller();
    const greet = await c.ok('tools/call', {
      name: 'greet',
      arguments: { name: 'Ada' },
      task: { ttl: 60000 },
    });
    expect(greet).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'Hello, Ada!' }] });
    const started = Date.now();
    const inline = await c.ok(
      'tools/call',
      { name: 'slow_compute', arguments: { seconds: 1 }, task: { ttl: 60000 } },
      { ext: false },
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(inline.resultType).toBe('complete');
    expect(inline.task).toBeUndefined();
  });

  it('tasks/get inlines the result when completed (a tool error stays completed) and the error when failed', async () => {
    const c = caller();
    const failing = await c.call('failing_job');
    expect(failing.resultType).toBe('task');
    const protocol = await c.call('protocol_error_job');
    expect(protocol.resultType).toBe('task');

    const toolError = await waitFor(
      () => c.get(failing.taskId),
      (t) => t.status !== 'working',
    );
    expect(toolError.status).toBe('completed');
    expect(toolError.result.isError).toBe(true);
    expect(toolError.result.content[0].text).toContain('failing_job failed on purpose');
    expect(toolError.error).toBeUndefined();

    const failed = await waitFor(
      () => c.get(protocol.taskId),
      (t) => t.status !== 'working',
    );
    expect(failed.status).toBe('failed');
    expect(failed.error).toEqual({ code: -32603, message: 'protocol_error_job failed on purpose' });
    expect(failed.result).toBeUndefined();
    expect(failed.resultType).toBe('complete');
  });

  it('checks Mcp-Name against params.taskId, and answers tasks/result and tasks/list with 404 -32601', async () => {
    const c = caller();
    const task = await c.call('slow_compute', { seconds: 0.5 });
    const mismatch = await c.send('tasks/get', { taskId: task.taskId }, { name: 'someone-else' });
    expect(mismatch.status).toBe(400);
    expect(errorOf(mismatch).code).toBe(-32020);
    for (const method of ['tasks/result', 'tasks/list']) {
      const answer = await c.send(method, method === 'tasks/result' ? { taskId: task.taskId } : {});
      expect(answer.status).toBe(404);
      expect(errorOf(answer).code).toBe(-32601);
    }
  });

  it('input_required: tasks/get shows the requests; a partial tasks/update keeps it parked with only the other key', async () => {
    const c = caller();
    const parked = await c.parked('multi_input');
    const keys = Object.keys(parked.inputRequests).sort();
    expect(keys).toHaveLength(2);
    expect(keys.every((k) => /^r\d+\.(first|last)_name$/.test(k))).toBe(true);
    const first = keys.find((k) => k.endsWith('first_name'))!;
    const last = keys.find((k) => k.endsWith('last_name'))!;
    expect(parked.inputRequests[first]).toMatchObject({
      method: 'elicitation/create',
      params: { message: 'What is your first name?' },
    });

    const ack = await c.ok('tasks/update', {
      taskId: parked.taskId,
      inputResponses: {
        [first]: { action: 'accept', content: { first_name: 'Ada' } },
        'r99.unknown': { ignored: true },
      },
    });
    expect(ack).toEqual({ resultType: 'complete', _meta: expect.any(Object) });
    const half = await c.get(parked.taskId);
    expect(half.status).toBe('input_required');
    expect(Object.keys(half.inputRequests)).toEqual([last]);

    // An answer to the key already answered is ignored: nothing changes.
    await c.ok('tasks/update', {
      taskId: parked.taskId,
      inputResponses: { [first]: { action: 'accept', content: { first_name: 'Mallory' } } },
    });
    const still = await c.get(parked.taskId);
    expect(still.status).toBe('input_required');
    expect(Object.keys(still.inputRequests)).toEqual([last]);

    await c.ok('tasks/update', {
      taskId: parked.taskId,
      inputResponses: { [last]: { action: 'accept', content: { last_name: 'Lovelace' } } },
    });
    const done = await waitFor(
      () => c.get(parked.taskId),
      (t) => t.status === 'completed',
    );
    expect(done.result.content).toEqual([{ type: 'text', text: 'Hello, Ada Lovelace!' }]);
    expect(done.inputRequests).toBeUndefined();
  });

  it('cancels an input_required task; a late tasks/update changes nothing; cancel of a finished task is the same ack', async () => {
    const c = caller();
    const parked = await c.parked('confirm_delete', { filename: 'a.txt' });
    const [key] = Object.keys(parked.inputRequests);
    expect(key).toMatch(/^r\d+\.confirm_delete$/);
    const ack = await c.ok('tasks/cancel', { taskId: parked.taskId });
    expect(ack).toEqual({ resultType: 'complete', _meta: expect.any(Object) });
    const cancelled = await c.get(parked.taskId);
    expect(cancelled.status).toBe('cancelled');
    expect(cancelled.inputRequests).toBeUndefined();

    const late = await c.send('tasks/update', {
      taskId: parked.taskId,
      inputResponses: { [key]: { action: 'accept', content: { confirm: true } } },
    });
    expect(late.status).toBe(200);
    await new Promise((r) => setTimeout(r, 300));
    const after = await c.get(parked.taskId);
    expect(after).toEqual(cancelled);

    const again = await c.ok('tasks/cancel', { taskId: parked.taskId });
    expect(again).toEqual(ack);
    const quick = await c.call('slow_compute', { seconds: 0.3 });
    await waitFor(
      () => c.status(quick.taskId),
      (s) => s === 'completed',
    );
    expect(await c.ok('tasks/cancel', { taskId: quick.taskId })).toEqual(ack);
    expect(await c.status(quick.taskId)).toBe('completed');
  });

  it('cancels a working task: it settles cancelled and stays so', async () => {
    const c = caller();
    const task = await c.call('slow_compute', { seconds: 2 });
    await c.ok('tasks/cancel', { taskId: task.taskId });
    expect(await c.status(task.taskId)).toBe('cancelled');
    await new Promise((r) => setTimeout(r, 2200));
    expect(await c.status(task.taskId)).toBe('cancelled');
  });

  it('answers an unknown task id with -32602 on every method', async () => {
    const c = caller();
    for (const taskId of ['A'.repeat(24), 'nope']) {
      for (const [method, extra] of [
        ['tasks/get', {}],
        ['tasks/update', { inputResponses: {} }],
        ['tasks/cancel', {}],
      ] as const) {
        const answer = await c.send(method, { taskId, ...extra });
        expect(errorOf(answer)).toEqual({ code: -32602, message: 'Task not found' });
      }
    }
  });

  it('expires an input_required task past its ttl: failed "Task expired", and an answer after changes nothing', async () => {
    const c = caller();
    // Instance B grants TASK_DEFAULT_TTL_MS = 1.5 s and sweeps every second.
    const created = await c.ok(
      'tools/call',
      { name: 'confirm_delete', arguments: { filename: 'e.txt' } },
      { caps: ELICIT, url: urlB },
    );
    expect(created).toMatchObject({ resultType: 'task', ttlMs: SHORT_TTL_MS });
    const parked = await waitFor(
      () => c.get(created.taskId, urlA),
      (t) => t.status === 'input_required',
    );
    const [key] = Object.keys(parked.inputRequests);
    // The janitor (not a reader) fails it: watch the row itself.
    const row = await waitFor(
      () =>
        withClient(db.url, (pg) =>
          pg.query('SELECT status, status_message FROM task WHERE id = $1', [created.taskId]),
        ).then((r) => r.rows[0]),
      (r) => r.status !== 'input_required',
      { intervalMs: 200, what: 'janitor expiry' },
    );
    expect(row).toEqual({ status: 'failed', status_message: 'Task expired' });
    const expired = await c.get(created.taskId);
    expect(expired).toMatchObject({ status: 'failed', statusMessage: 'Task expired' });
    expect(expired.error).toEqual(expect.objectContaining({ message: expect.stringContaining('expired') }));
    await c.ok('tasks/update', {
      taskId: created.taskId,
      inputResponses: { [key]: { action: 'accept', content: { confirm: true } } },
    });
    expect(await c.get(created.taskId)).toEqual(expired);
  });

  it('runs MRTR rounds before the task: input_required with requestState, then a CreateTaskResult whose result has the name', async () => {
    const c = caller();
    const round = await c.call('test_tool_with_task', {}, ELICIT);
    expect(round.resultType).toBe('input_required');
    expect(round.inputRequests.user_name).toMatchObject({ method: 'elicitation/create' });
    expect(typeof round.requestState).toBe('string');
    expect(round.taskId).toBeUndefined();

    const created = await c.ok(
      'tools/call',
      {
        name: 'test_tool_with_task',
        arguments: {},
        inputResponses: { user_name: { action: 'accept', content: { user_name: 'Grace' } } },
        requestState: round.requestState,
      },
      { caps: ELICIT },
    );
    expect(created.resultType).toBe('task');
    expect(created.requestState).toBeUndefined();
    const done = await waitFor(
      () => c.get(created.taskId),
      (t) => t.status === 'completed',
    );
    expect(done.result.content[0].text).toContain('Grace');
  });

  it('subscriptions/listen: acknowledges only the caller’s ids, then sends the detailed task at every transition', async () => {
    const c = caller();
    const other = caller();
    const theirs = await other.call('slow_compute', { seconds: 30 });
    const parked = await c.parked('multi_input');
    const keys = Object.keys(parked.inputRequests);
    const { id, stream } = await c.listen([parked.taskId, theirs.taskId, 'A'.repeat(24)]);
    try {
      expect(stream.status).toBe(200);
      const ack = await stream.next();
      expect(ack.json).toEqual({
        jsonrpc: '2.0',
        method: 'notifications/subscriptions/acknowledged',
        params: { _meta: { [SUBSCRIPTION_ID]: id }, notifications: { taskIds: [parked.taskId] } },
      });
      for (const k of keys) {
        await c.ok('tasks/update', {
          taskId: parked.taskId,
          inputResponses: { [k]: { action: 'accept', content: { first_name: 'Ada', last_name: 'Byron' } } },
        });
      }
      // Their task changes too, but nothing about it may arrive here.
      await other.ok('tasks/cancel', { taskId: theirs.taskId });
      const { seen } = await nextMatching(
        stream,
        (ev) => ev.json?.method === 'notifications/tasks' && ev.json.params.status === 'completed',
      );
      for (const ev of seen) {
        expect(ev.json.method).toBe('notifications/tasks');
        expect(ev.json.params._meta).toEqual({ [SUBSCRIPTION_ID]: id });
        expect(ev.json.params.taskId).toBe(parked.taskId);
      }
      const statuses = seen.map((ev) => ev.json.params.status);
      // A partial answer is not a transition; the last answer resumes the task, which then completes.
      expect(statuses).toEqual(['working', 'completed']);
      const last = seen[seen.length - 1].json.params;
      expect(last.result.content).toEqual([{ type: 'text', text: 'Hello, Ada Byron!' }]);
      expect(last).toMatchObject({ ttlMs: parked.ttlMs, createdAt: parked.createdAt });
      await expect(stream.next(500)).rejects.toThrow('no SSE event in time');
    } finally {
      stream.close();
    }
  });

  it('subscriptions/listen without the extension is refused with -32021', async () => {
    const c = caller();
    const { stream } = await c.listen(['A'.repeat(24)], urlA, false);
    expect(stream.status).toBe(400);
    stream.close();
  });

  it('a subscription held on instance A sees transitions made on instance B', async () => {
    const c = caller();
    const parked = await c.parked('confirm_delete', { filename: 'b.txt' });
    const [key] = Object.keys(parked.inputRequests);
    const { stream } = await c.listen([parked.taskId], urlA);
    try {
      await stream.next(); // acknowledgement
      // Answered on B: B resumes and finishes the task; A only hears about it.
      await c.ok(
        'tasks/update',
        {
          taskId: parked.taskId,
          inputResponses: { [key]: { action: 'accept', content: { confirm: true } } },
        },
        { url: urlB },
      );
      const { event, seen } = await nextMatching(
        stream,
        (ev: SseEvent) => ev.json?.params?.status === 'completed',
      );
      expect(seen.map((ev) => ev.json.params.status)).toEqual(['working', 'completed']);
      expect(event.json.params.result.content).toEqual([{ type: 'text', text: 'Deleted b.txt' }]);
      const ran = await withClient(db.url, (pg) =>
        pg.query('SELECT instance_id FROM task WHERE id = $1', [parked.taskId]),
      );
      expect(ran.rows).toHaveLength(1);

      // And a cancel on B of another task A watches.
      const slow = await c.call('slow_compute', { seconds: 30 });
      const second = await c.listen([slow.taskId], urlA);
      try {
        await second.stream.next();
        await c.ok('tasks/cancel', { taskId: slow.taskId }, { url: urlB });
        const cancelled = await nextMatching(second.stream, (ev) => ev.json?.params?.status === 'cancelled');
        expect(cancelled.event.json.params.taskId).toBe(slow.taskId);
      } finally {
        second.stream.close();
      }
    } finally {
      stream.close();
    }
  });
});
