import {
  modernCall,
  openSession,
  openStream,
  rpc,
  sessionHeaders,
  type SseEvent,
} from '../support/mcp-http.js';
import { startServer, stopServer, type ServerProcess } from '../support/server-process.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const STATE_SECRET = 'e2e-multi-instance-state-secret-0123456789';

/**
 * Two server processes on one database, as behind a load balancer without sticky sessions: sessions,
 * the SSE event log, client responses and endings travel through PostgreSQL (tables + LISTEN/NOTIFY).
 */
describe('two server processes on one database', () => {
  let db: TestDatabase;
  let a: ServerProcess;
  let b: ServerProcess;
  let urlA: string;
  let urlB: string;

  const postStream = (url: string, session: string, body: unknown) =>
    openStream(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...sessionHeaders(session),
      },
      body: JSON.stringify(body),
    });
  const getStream = (url: string, session: string, lastEventId?: string) =>
    openStream(url, {
      method: 'GET',
      headers: {
        accept: 'text/event-stream',
        ...sessionHeaders(session),
        ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
      },
    });

  beforeAll(async () => {
    db = await createTestDatabase('multi');
    const env = { DATABASE_URL: db.url, MCP_CONFORMANCE_FIXTURES: 'true', MRTR_STATE_SECRET: STATE_SECRET };
    // One after the other: the second finds the migrations applied.
    a = await startServer(env);
    b = await startServer(env);
    urlA = `${a.baseUrl}/mcp`;
    urlB = `${b.baseUrl}/mcp`;
  });
  afterAll(async () => {
    await Promise.all([a && stopServer(a), b && stopServer(b)]);
    await db.drop();
  });

  it('runs two distinct processes', () => {
    expect(a.proc.pid).not.toBe(b.proc.pid);
    expect(a.port).not.toBe(b.port);
  });

  it('serves on B a session opened on A', async () => {
    const session = await openSession(urlA);
    const res = await rpc(
      urlB,
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'test_simple_text', arguments: {} } },
      sessionHeaders(session),
    );
    expect(res.status).toBe(200);
    expect(res.json.result.content[0].text).toBe('This is a simple text response for testing.');
    // logging/setLevel on B is honoured by a call on A (the level lives in the session row).
    const level = await rpc(
      urlB,
      { jsonrpc: '2.0', id: 2, method: 'logging/setLevel', params: { level: 'error' } },
      sessionHeaders(session),
    );
    expect(level.json.result).toEqual({});
    const quiet = await rpc(
      urlA,
      {
        jsonrpc: '2.0',
        id: 3,
        method: 'tools/call',
        params: { name: 'test_tool_with_logging', arguments: {} },
      },
      sessionHeaders(session),
    );
    expect(quiet.headers.get('content-type')).toMatch(/^application\/json/);
  });

  it('resumes on B, with Last-Event-ID, a POST stream started on A and dropped', async () => {
    const session = await openSession(urlA);
    const post = await postStream(urlA, session, {
      jsonrpc: '2.0',
      id: 10,
      method: 'tools/call',
      params: { name: 'test_tool_with_progress', arguments: {}, _meta: { progressToken: 'mi' } },
    });
    const priming = await post.next();
    const first = await post.next();
    expect(first.json.params.progress).toBe(0);
    post.close();

    const resumed = await getStream(urlB, session, first.id);
    const rest: SseEvent[] = [];
    try {
      for (;;) {
        const e = await resumed.next(5000);
        if (e.data === '') continue;
        rest.push(e);
        if ('result' in e.json) break;
      }
    } finally {
      resumed.close();
    }
    expect(rest.map((e) => e.json.params?.progress ?? e.json.result.content[0].text)).toEqual([
      50,
      100,
      'Progress test completed',
    ]);
    const ids = [priming.id, first.id, ...rest.map((e) => e.id)];
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('test_reconnection: the stream A closes is finished on B', async () => {
    const session = await openSession(urlA);
    const post = await postStream(urlA, session, {
      jsonrpc: '2.0',
      id: 11,
      method: 'tools/call',
      params: { name: 'test_reconnection', arguments: {} },
    });
    const priming = await post.next();
    await expect(post.next(3000)).rejects.toThrow('stream ended');
    const resumed = await rpc(
      urlB,
      undefined,
      { ...sessionHeaders(session), accept: 'text/event-stream', 'last-event-id': priming.id! },
      'GET',
    );
    expect(resumed.events.filter((e) => e.data !== '').map((e) => e.json)).toEqual([
      {
        jsonrpc: '2.0',
        id: 11,
        result: { content: [{ type: 'text', text: 'Reconnection test completed' }] },
      },
    ]);
  });

  it('an elicitation asked by a handler on A is answered by a POST to B; the call on A completes', async () => {
    const session = await openSession(urlA, { elicitation: {} });
    const call = await postStream(urlA, session, {
      jsonrpc: '2.0',
      id: 12,
      method: 'tools/call',
      params: { name: 'test_elicitation', arguments: { message: 'who?' } },
    });
    try {
      await call.next(); // priming
      const ask = await call.next();
      expect(ask.json).toMatchObject({ method: 'elicitation/create', params: { message: 'who?' } });
      const answer = await rpc(
        urlB,
        {
          jsonrpc: '2.0',
          id: ask.json.id,
          result: { action: 'accept', content: { username: 'bo', email: 'bo@example.com' } },
        },
        sessionHeaders(session),
      );
      expect(answer.status).toBe(202);
      const done = await call.next(5000);
      expect(done.json).toMatchObject({ jsonrpc: '2.0', id: 12, result: { content: [{ type: 'text' }] } });
      // The answer was parked as JSONB on its way from B to A, so its keys may come back in another order.
      const text = done.json.result.content[0].text as string;
      expect(text).toMatch(/^User response: action=accept, content=/);
      expect(JSON.parse(text.slice(text.indexOf('content=') + 8))).toEqual({
        username: 'bo',
        email: 'bo@example.com',
      });
    } finally {
      call.close();
    }
  });

  it('live delivery across instances: a stream resumed on B receives what the handler on A sends next', async () => {
    const session = await openSession(urlA, { elicitation: {} });
    const call = await postStream(urlA, session, {
      jsonrpc: '2.0',
      id: 13,
      method: 'tools/call',
      params: { name: 'test_elicitation', arguments: { message: 'again?' } },
    });
    await call.next(); // priming
    const ask = await call.next();
    call.close(); // the client lost A; the handler on A keeps waiting for its answer
    const resumed = await getStream(urlB, session, ask.id);
    try {
      // Nothing to replay yet: the handler is still waiting.
      await expect(resumed.next(300)).rejects.toThrow('no SSE event in time');
      const answer = await rpc(
        urlA,
        { jsonrpc: '2.0', id: ask.json.id, result: { action: 'decline' } },
        sessionHeaders(session),
      );
      expect(answer.status).toBe(202);
      // The result, produced on A after B's stream was attached, reaches B over LISTEN/NOTIFY.
      const done = await resumed.next(5000);
      expect(done.json).toEqual({
        jsonrpc: '2.0',
        id: 13,
        result: { content: [{ type: 'text', text: 'User response: action=decline, content={}' }] },
      });
    } finally {
      resumed.close();
    }
  });

  it('DELETE on B ends the session for A too', async () => {
    const session = await openSession(urlA);
    expect(
      (await rpc(urlA, { jsonrpc: '2.0', id: 14, method: 'ping' }, sessionHeaders(session))).status,
    ).toBe(200);
    const del = await rpc(urlB, undefined, sessionHeaders(session), 'DELETE');
    expect(del.status).toBe(200);
    const after = await rpc(urlA, { jsonrpc: '2.0', id: 15, method: 'ping' }, sessionHeaders(session));
    expect(after.status).toBe(404);
    const get = await rpc(
      urlA,
      undefined,
      { ...sessionHeaders(session), accept: 'text/event-stream' },
      'GET',
    );
    expect(get.status).toBe(404);
  });

  it('2026-07-28 MRTR: requestState issued by A is honoured by B (shared secret)', async () => {
    const tool = 'test_input_required_result_elicitation';
    const r1 = await modernCall(
      urlA,
      20,
      'tools/call',
      { name: tool, arguments: {} },
      {
        name: tool,
        caps: { elicitation: {} },
      },
    );
    expect(r1.json.result.resultType).toBe('input_required');
    const r2 = await modernCall(
      urlB,
      21,
      'tools/call',
      {
        name: tool,
        arguments: {},
        inputResponses: { user_name: { action: 'accept', content: { name: 'Grace' } } },
        requestState: r1.json.result.requestState,
      },
      { name: tool, caps: { elicitation: {} } },
    );
    expect(r2.json.result).toMatchObject({ resultType: 'complete', content: [{ text: 'Hello, Grace!' }] });
  });
});
