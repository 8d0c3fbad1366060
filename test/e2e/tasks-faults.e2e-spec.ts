import type { INestApplication } from '@nestjs/common';
import { MODERN, modernCall, openStream, responseOf } from '../support/mcp-http.js';
import {
  EXT_CAPS,
  LegacyClient,
  nextMatching,
  rpcId,
  SUBSCRIPTION_ID,
  waitFor,
} from '../support/tasks-e2e.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const SHORT_TTL_MS = 1500;
const ELICIT = { elicitation: {} };
const ANALYSE = { name: 'analyse_text', arguments: { text: 'a\nb\nc', delayMs: 1000 } };

/**
 * Task faults over real HTTP: progress and logs from a tool after its call became a task (both eras), and
 * input that arrives after a task's ttl ran out but before any sweep. A: the example tools (analyse_text);
 * B: the conformance fixtures with short ttls and no janitor, so only the write path can notice the expiry.
 */
describe('task faults over real HTTP', () => {
  let db: TestDatabase;
  let a: INestApplication;
  let b: INestApplication;
  let urlA: string;
  let urlB: string;

  const modernOk = async (
    url: string,
    method: string,
    params: Record<string, unknown>,
    opts: { caps?: Record<string, unknown>; meta?: Record<string, unknown>; name?: string } = {},
  ): Promise<any> => {
    const name = opts.name ?? (typeof params.taskId === 'string' ? params.taskId : (params.name as string));
    const answer = await modernCall(url, rpcId(), method, params, {
      caps: { ...EXT_CAPS, ...(opts.caps ?? {}) },
      meta: opts.meta,
      name,
    });
    const response = responseOf(answer);
    if (!response || !('result' in response)) throw new Error(`${method}: ${answer.status} ${answer.text}`);
    return response.result;
  };

  beforeAll(async () => {
    db = await createTestDatabase('tasks_faults');
    a = await createTestApp(db.url, { TASK_INLINE_WINDOW_MS: '100' });
    b = await createTestApp(db.url, {
      MCP_CONFORMANCE_FIXTURES: 'true',
      TASK_INLINE_WINDOW_MS: '100',
      TASK_DEFAULT_TTL_MS: String(SHORT_TTL_MS),
      JANITOR_ENABLED: 'false',
    });
    urlA = `${await a.getUrl()}/mcp`;
    urlB = `${await b.getUrl()}/mcp`;
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it('2026-07-28: progress after escalation becomes the statusMessage a subscriber sees; the task completes cleanly', async () => {
    const created = await modernOk(urlA, 'tools/call', ANALYSE, {
      meta: { progressToken: 'p-modern', 'io.modelcontextprotocol/logLevel': 'debug' },
    });
    expect(created).toMatchObject({ resultType: 'task', status: 'working' });
    const id = rpcId();
    const stream = await openStream(urlA, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN,
        'mcp-method': 'subscriptions/listen',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id,
        method: 'subscriptions/listen',
        params: {
          notifications: { taskIds: [created.taskId] },
          _meta: {
            'io.modelcontextprotocol/protocolVersion': MODERN,
            'io.modelcontextprotocol/clientCapabilities': EXT_CAPS,
          },
        },
      }),
    });
    try {
      const { seen } = await nextMatching(
        stream,
        (ev) => ev.json?.method === 'notifications/tasks' && ev.json.params.status !== 'working',
        15000,
      );
      const tasks = seen
        .filter((ev) => ev.json?.method === 'notifications/tasks')
        .map((ev) => ev.json.params);
      for (const t of tasks) expect(t._meta).toEqual({ [SUBSCRIPTION_ID]: id });
      const progress = tasks.filter((t) => t.status === 'working').map((t) => t.statusMessage);
      expect(progress.length).toBeGreaterThan(0);
      for (const m of progress) expect(m).toMatch(/^line [123] of 3$/);
      const last = tasks[tasks.length - 1];
      expect(last.status).toBe('completed');
      expect(last.result.isError).toBeUndefined();
      expect(last.result.content).toEqual([
        { type: 'text', text: 'line 1: 1 words\nline 2: 1 words\nline 3: 1 words' },
      ]);
    } finally {
      stream.close();
    }
  });

  it('2025-11-25: a task with a progressToken shows its progress as statusMessage and completes cleanly', async () => {
    const client = await LegacyClient.open(urlA);
    const result = await client.result('tools/call', {
      ...ANALYSE,
      task: {},
      _meta: { progressToken: 'p-legacy' },
    });
    const taskId: string = result.task.taskId;
    const during = await waitFor(
      () => client.result('tasks/get', { taskId }),
      (t) => t.status !== 'working' || /^line [123] of 3$/.test(t.statusMessage ?? ''),
      { what: 'a progress statusMessage', intervalMs: 100 },
    );
    expect(during.status).toBe('working');
    const final = await client.result('tasks/result', { taskId });
    expect(final.isError).toBeUndefined();
    expect(final.content).toEqual([
      { type: 'text', text: 'line 1: 1 words\nline 2: 1 words\nline 3: 1 words' },
    ]);
    expect((await client.result('tasks/get', { taskId })).status).toBe('completed');
  });

  it('an answer after the ttl (not yet swept) expires the parked task instead of running the tool again', async () => {
    const created = await modernOk(
      urlB,
      'tools/call',
      { name: 'confirm_delete', arguments: { filename: 'late.txt' } },
      { caps: ELICIT },
    );
    expect(created).toMatchObject({ resultType: 'task', ttlMs: SHORT_TTL_MS });
    const parked = await waitFor(
      () => modernOk(urlB, 'tasks/get', { taskId: created.taskId }),
      (t) => t.status === 'input_required',
      { what: 'input_required' },
    );
    const [key] = Object.keys(parked.inputRequests);
    // Past created + ttl; B runs no janitor and nothing reads the task meanwhile.
    const age = Date.now() - Date.parse(parked.createdAt);
    await new Promise((r) => setTimeout(r, Math.max(0, SHORT_TTL_MS - age) + 300));
    expect(
      await modernOk(urlB, 'tasks/update', {
        taskId: created.taskId,
        inputResponses: { [key]: { action: 'accept', content: { confirm: true } } },
      }),
    ).toMatchObject({ resultType: 'complete' });
    await new Promise((r) => setTimeout(r, 500));
    const after = await modernOk(urlB, 'tasks/get', { taskId: created.taskId });
    expect(after).toMatchObject({ status: 'failed', statusMessage: 'Task expired' });
    expect(after.result).toBeUndefined();
  });
});
