import { openStream, rpc, type SseEvent } from '../support/mcp-http.js';
import { startNginx, type Nginx } from '../support/nginx.js';
import { startServer, stopServer, type ServerProcess } from '../support/server-process.js';
import {
  asUser,
  EXT_CAPS,
  freshUser,
  LegacyClient,
  modern,
  nextMatching,
  PROXY_SECRET,
  rpcId,
  waitFor,
} from '../support/tasks-e2e.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const STATE_SECRET = 'e2e-scale-out-state-secret-0123456789abcdef';

/**
 * The scale-out deployment for real: three server processes on one database behind a real nginx using the
 * committed deploy/nginx/mcp-proxy.conf, round-robin with no affinity. Every conversation below goes through
 * nginx only, so consecutive requests of one session, task or stream land on different instances; the
 * access log proves they did.
 */
describe('three instances behind nginx, no affinity', () => {
  let db: TestDatabase;
  const servers: ServerProcess[] = [];
  let nginx: Nginx;
  let url: string;

  beforeAll(async () => {
    db = await createTestDatabase('scale');
    const env = {
      DATABASE_URL: db.url,
      MCP_CONFORMANCE_FIXTURES: 'true',
      MRTR_STATE_SECRET: STATE_SECRET,
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
    };
    // One after the other: the first applies the migrations, the others find them applied.
    for (let i = 0; i < 3; i++) servers.push(await startServer(env));
    nginx = await startNginx(servers.map((s) => `127.0.0.1:${s.port}`));
    url = `${nginx.baseUrl}/mcp`;
  });
  afterAll(async () => {
    await nginx?.stop();
    await Promise.all(servers.map((s) => stopServer(s)));
    await db?.drop();
  });

  /** Upstreams that served /mcp requests since `from` (an index into the access log). */
  async function upstreamsSince(from: number): Promise<string[]> {
    return (await nginx.upstreams())
      .slice(from)
      .filter((e) => e.uri.startsWith('/mcp'))
      .map((e) => e.upstream);
  }
  const logLength = async (): Promise<number> => (await nginx.upstreams()).length;
  /** Every instance took part in the conversation since `from`: nothing stuck to one of them. */
  async function expectAllInstancesServed(from: number): Promise<void> {
    expect(new Set(await upstreamsSince(from))).toEqual(new Set(servers.map((s) => `127.0.0.1:${s.port}`)));
  }

  it('legacy era: one session served by all three instances in turn', async () => {
    const from = await logLength();
    const c = await LegacyClient.open(url, {}, asUser(freshUser('scale')));
    const tools = await c.result('tools/list');
    expect(tools.tools.map((t: { name: string }) => t.name)).toContain('slow_compute');
    for (let i = 0; i < 6; i++) {
      const r = await c.result('tools/call', { name: 'test_simple_text', arguments: {} });
      expect(r.content[0].text).toBe('This is a simple text response for testing.');
    }
    expect(await c.result('ping')).toEqual({});
    const served = await upstreamsSince(from);
    expect(served.length).toBeGreaterThanOrEqual(9);
    await expectAllInstancesServed(from);
  });

  it('2025-11-25 tasks: status notifications reach a stream held by another instance, then replay from a third', async () => {
    const from = await logLength();
    const c = await LegacyClient.open(url, {}, asUser(freshUser('scale')));
    const stream = await c.openGetStream();
    expect(stream.status).toBe(200);
    const priming = await stream.next();
    const task = await c.createTask('slow_compute', { seconds: 1, label: 'lb' });
    const isStatus = (ev: SseEvent) => ev.json?.method === 'notifications/tasks/status';
    const { seen } = await nextMatching(
      stream,
      (ev) => isStatus(ev) && ev.json.params.status === 'completed',
    );
    stream.close();
    expect(seen.filter(isStatus).map((ev) => ev.json.params.status)).toEqual(['working', 'completed']);

    const got = await c.result('tasks/get', { taskId: task.taskId });
    expect(got.status).toBe('completed');
    const result = await c.result('tasks/result', { taskId: task.taskId });
    expect(result.content).toEqual([{ type: 'text', text: 'Computed lb after 1 s' }]);

    // The dropped stream resumes through the balancer, on whichever instance it lands.
    const replay = await c.openGetStream(priming.id);
    const replayed = await nextMatching(
      replay,
      (ev) => isStatus(ev) && ev.json.params.status === 'completed',
    );
    replay.close();
    expect(replayed.seen.filter(isStatus).map((ev) => ev.json.params.taskId)).toEqual([
      task.taskId,
      task.taskId,
    ]);
    await expectAllInstancesServed(from);
  });

  it('SSE resumption: a POST stream dropped mid-call is finished by a GET with Last-Event-ID', async () => {
    const from = await logLength();
    const c = await LegacyClient.open(url, {}, asUser(freshUser('scale')));
    const post = await openStream(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...c.headers(),
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 77,
        method: 'tools/call',
        params: { name: 'test_tool_with_progress', arguments: {}, _meta: { progressToken: 'lb' } },
      }),
    });
    expect(post.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await post.next(); // priming
    const first = await post.next();
    expect(first.json.params.progress).toBe(0);
    post.close();
    const resumed = await c.openGetStream(first.id);
    const rest: unknown[] = [];
    try {
      for (;;) {
        const e = await resumed.next(10000);
        if (e.data === '') continue;
        rest.push(e.json.params?.progress ?? e.json.result.content[0].text);
        if ('result' in e.json) break;
      }
    } finally {
      resumed.close();
    }
    expect(rest).toEqual([50, 100, 'Progress test completed']);
    await expectAllInstancesServed(from);
  });

  it('2026-07-28: a parked task answered through the balancer notifies a subscription held elsewhere', async () => {
    const from = await logLength();
    const headers = asUser(freshUser('scale'));
    const call = await modern(
      url,
      'tools/call',
      { name: 'confirm_delete', arguments: { filename: 'lb.txt' } },
      {
        caps: { elicitation: {} },
        headers,
      },
    );
    const created = call.json.result;
    expect(created.resultType).toBe('task');
    const parked = await waitFor(
      async () => (await modern(url, 'tasks/get', { taskId: created.taskId }, { headers })).json.result,
      (t) => t.status === 'input_required',
      { what: 'input_required' },
    );
    const id = rpcId();
    const listen = await openStream(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'subscriptions/listen',
        ...headers,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id,
        method: 'subscriptions/listen',
        params: {
          notifications: { taskIds: [created.taskId] },
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientCapabilities': EXT_CAPS,
          },
        },
      }),
    });
    try {
      expect(listen.status).toBe(200);
      const ack = await listen.next();
      expect(ack.json.params.notifications.taskIds).toEqual([created.taskId]);
      const [key] = Object.keys(parked.inputRequests);
      const update = await modern(
        url,
        'tasks/update',
        {
          taskId: created.taskId,
          inputResponses: { [key]: { action: 'accept', content: { confirm: true } } },
        },
        { headers },
      );
      expect(update.status).toBe(200);
      const { event, seen } = await nextMatching(listen, (ev) => ev.json?.params?.status === 'completed');
      expect(seen.map((ev) => ev.json.params.status)).toEqual(['working', 'completed']);
      expect(event.json.params.result.content).toEqual([{ type: 'text', text: 'Deleted lb.txt' }]);
    } finally {
      listen.close();
    }
    await expectAllInstancesServed(from);
  });

  it('ending a session through the balancer ends it on every instance', async () => {
    const from = await logLength();
    const c = await LegacyClient.open(url, {}, asUser(freshUser('scale')));
    expect((await rpc(url, undefined, c.headers(), 'DELETE')).status).toBe(200);
    for (let i = 0; i < 3; i++) {
      const after = await rpc(url, { jsonrpc: '2.0', id: rpcId(), method: 'ping' }, c.headers());
      expect(after.status).toBe(404);
    }
    await expectAllInstancesServed(from);
  });
});
