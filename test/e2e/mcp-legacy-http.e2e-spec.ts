import type { INestApplication } from '@nestjs/common';
import { LEGACY, openSession, openStream, rpc, sessionHeaders, type RpcAnswer } from '../support/mcp-http.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const PROXY_SECRET = 'proxy-secret-legacy-0123456789';

/** The SSO-proxy headers that make a request come from `user`. */
function as(user: string): Record<string, string> {
  return { 'x-auth-proxy-secret': PROXY_SECRET, 'x-forwarded-user': user };
}

const ALICE = as('alice');
const BOB = as('bob');

/** Reads the raw bytes of an SSE response for `ms`, then drops the connection. */
async function readRawFor(
  url: string,
  headers: Record<string, string>,
  ms: number,
): Promise<{ status: number; headers: Headers; text: string }> {
  const controller = new AbortController();
  const res = await fetch(url, { method: 'GET', headers, signal: controller.signal });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const deadline = Date.now() + ms;
  try {
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      const chunk = await Promise.race([
        reader.read(),
        new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), left)),
      ]);
      if (chunk === 'timeout' || chunk.done) break;
      text += decoder.decode(chunk.value, { stream: true });
    }
  } finally {
    controller.abort();
  }
  return { status: res.status, headers: res.headers, text };
}

/**
 * The legacy era (2025-11-25 and older) on raw HTTP: the session rules, the GET stream, the Accept and
 * version headers, and the choice between a JSON and an SSE answer
 * (https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#streamable-http).
 */
describe('MCP legacy era over raw Streamable HTTP', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;

  const toolsList = { jsonrpc: '2.0', id: 1, method: 'tools/list' };

  beforeAll(async () => {
    db = await createTestDatabase('legacy');
    app = await createTestApp(db.url, {
      MCP_CONFORMANCE_FIXTURES: 'true',
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      SSE_KEEPALIVE_MS: '1000',
      SSE_RETRY_MS: '250',
    });
    url = await loopbackUrl(app, '/mcp');
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  describe('sessions', () => {
    it('initialize answers with a fresh, visible-ASCII Mcp-Session-Id and the negotiated version', async () => {
      const init = (version: string): Promise<RpcAnswer> =>
        rpc(
          url,
          {
            jsonrpc: '2.0',
            id: 0,
            method: 'initialize',
            params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
          },
          ALICE,
        );
      const a = await init(LEGACY);
      const b = await init('2025-03-26');
      expect(a.status).toBe(200);
      const idA = a.headers.get('mcp-session-id')!;
      const idB = b.headers.get('mcp-session-id')!;
      expect(idA).toMatch(/^[\x21-\x7e]{22,}$/);
      expect(idB).toMatch(/^[\x21-\x7e]{22,}$/);
      expect(idA).not.toBe(idB);
      expect(a.json.result).toMatchObject({
        protocolVersion: LEGACY,
        serverInfo: { name: 'mcp-task-server' },
      });
      expect(b.json.result.protocolVersion).toBe('2025-03-26');
      // A version we do not speak is answered with our latest one.
      const c = await init('1999-01-01');
      expect(c.json.result.protocolVersion).toBe(LEGACY);
    });

    it('refuses a request without Mcp-Session-Id with 400', async () => {
      const res = await rpc(url, toolsList, { ...ALICE, 'mcp-protocol-version': LEGACY });
      expect(res.status).toBe(400);
      expect(res.json.error.message).toMatch(/Mcp-Session-Id/);
    });

    it('refuses an unknown session id with 404', async () => {
      const res = await rpc(url, toolsList, sessionHeaders('no-such-session-0123456789', ALICE));
      expect(res.status).toBe(404);
      expect(res.json).toEqual({
        jsonrpc: '2.0',
        id: 1,
        error: { code: -32001, message: 'Session not found' },
      });
    });

    it('answers another principal using a session id exactly as an unknown id: 404, same body', async () => {
      const session = await openSession(url, {}, ALICE);
      const own = await rpc(url, toolsList, sessionHeaders(session, ALICE));
      expect(own.status).toBe(200);
      expect(own.json.result.tools.length).toBeGreaterThan(0);

      const foreign = await rpc(url, toolsList, sessionHeaders(session, BOB));
      const unknown = await rpc(url, toolsList, sessionHeaders(`${session}x`, BOB));
      expect(foreign.status).toBe(404);
      expect(foreign.json).toEqual(unknown.json);
      // GET and DELETE by the other principal are refused the same way and leave the session alive.
      const get = await rpc(
        url,
        undefined,
        { ...sessionHeaders(session, BOB), accept: 'text/event-stream' },
        'GET',
      );
      expect(get.status).toBe(404);
      const del = await rpc(url, undefined, sessionHeaders(session, BOB), 'DELETE');
      expect(del.status).toBe(404);
      expect((await rpc(url, toolsList, sessionHeaders(session, ALICE))).status).toBe(200);
    });

    it('DELETE ends the session: every later request with its id gets 404', async () => {
      const session = await openSession(url, {}, ALICE);
      const del = await rpc(url, undefined, sessionHeaders(session, ALICE), 'DELETE');
      expect(del.status).toBe(200);
      expect((await rpc(url, toolsList, sessionHeaders(session, ALICE))).status).toBe(404);
      const get = await rpc(
        url,
        undefined,
        { ...sessionHeaders(session, ALICE), accept: 'text/event-stream' },
        'GET',
      );
      expect(get.status).toBe(404);
      expect((await rpc(url, undefined, sessionHeaders(session, ALICE), 'DELETE')).status).toBe(404);
    });

    it('a second initialize inside a session is refused with 400', async () => {
      const session = await openSession(url, {}, ALICE);
      const res = await rpc(
        url,
        {
          jsonrpc: '2.0',
          id: 2,
          method: 'initialize',
          params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'x', version: '1' } },
        },
        sessionHeaders(session, ALICE),
      );
      expect(res.status).toBe(400);
      expect(res.json.error.code).toBe(-32600);
    });
  });

  describe('headers', () => {
    let session: string;
    beforeAll(async () => {
      session = await openSession(url, {}, ALICE);
    });

    it('accepts notifications and client responses with 202 and no body', async () => {
      const note = await rpc(
        url,
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        sessionHeaders(session, ALICE),
      );
      expect(note.status).toBe(202);
      expect(note.text).toBe('');
      const cancel = await rpc(
        url,
        { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 99, reason: 'x' } },
        sessionHeaders(session, ALICE),
      );
      expect(cancel.status).toBe(202);
      const stray = await rpc(
        url,
        { jsonrpc: '2.0', id: 'srv-nothing', result: {} },
        sessionHeaders(session, ALICE),
      );
      // It answers nothing this session asked: refused, and not stored.
      expect(stray.status).toBe(400);
      expect(stray.json.error.code).toBe(-32600);
    });

    it('refuses an unsupported MCP-Protocol-Version with 400 and accepts every supported one', async () => {
      const bad = await rpc(url, toolsList, {
        ...sessionHeaders(session, ALICE),
        'mcp-protocol-version': '2030-01-01',
      });
      expect(bad.status).toBe(400);
      expect(bad.json.error.message).toMatch(/Unsupported protocol version: 2030-01-01/);
      for (const v of ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25']) {
        const ok = await rpc(url, toolsList, {
          ...sessionHeaders(session, ALICE),
          'mcp-protocol-version': v,
        });
        expect(ok.status).toBe(200);
      }
    });

    it('refuses a POST whose Accept lacks text/event-stream (or application/json) with 406', async () => {
      for (const accept of ['application/json', 'text/event-stream']) {
        const res = await rpc(url, toolsList, { ...sessionHeaders(session, ALICE), accept });
        expect(res.status).toBe(406);
        expect(res.json.error.message).toMatch(/Not Acceptable/);
      }
    });

    it('refuses a GET whose Accept lacks text/event-stream with 406', async () => {
      const res = await rpc(
        url,
        undefined,
        { ...sessionHeaders(session, ALICE), accept: 'application/json' },
        'GET',
      );
      expect(res.status).toBe(406);
    });
  });

  describe('answers: JSON or SSE', () => {
    let session: string;
    beforeAll(async () => {
      session = await openSession(url, {}, ALICE);
    });

    it('answers with one JSON body when the handler emits nothing before its result', async () => {
      const res = await rpc(
        url,
        { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'test_simple_text', arguments: {} } },
        sessionHeaders(session, ALICE),
      );
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(res.json).toEqual({
        jsonrpc: '2.0',
        id: 3,
        result: { content: [{ type: 'text', text: 'This is a simple text response for testing.' }] },
      });
    });

    it('answers with an SSE stream when the handler emits a notification first', async () => {
      const res = await rpc(
        url,
        {
          jsonrpc: '2.0',
          id: 4,
          method: 'tools/call',
          params: { name: 'test_tool_with_progress', arguments: {}, _meta: { progressToken: 7 } },
        },
        sessionHeaders(session, ALICE),
      );
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      expect(res.headers.get('x-accel-buffering')).toBe('no');
      const [priming, ...rest] = res.events;
      expect(priming).toMatchObject({ data: '', retry: 250 });
      expect(priming.id).toMatch(/_\d+$/);
      expect(rest.map((e) => e.json.method ?? 'response')).toEqual([
        'notifications/progress',
        'notifications/progress',
        'notifications/progress',
        'response',
      ]);
      expect(rest.map((e) => e.json.params?.progress)).toEqual([0, 50, 100, undefined]);
      expect(rest[3].json).toMatchObject({
        id: 4,
        result: { content: [{ text: 'Progress test completed' }] },
      });
      const ids = res.events.map((e) => e.id);
      expect(new Set(ids).size).toBe(ids.length);
    });

    it('without a progress token the same tool answers with plain JSON', async () => {
      const res = await rpc(
        url,
        {
          jsonrpc: '2.0',
          id: 5,
          method: 'tools/call',
          params: { name: 'test_tool_with_progress', arguments: {} },
        },
        sessionHeaders(session, ALICE),
      );
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(res.json.result.content[0].text).toBe('Progress test completed');
    });
  });

  describe('the GET stream', () => {
    it('opens with a priming event (id + retry), headers that defeat buffering, and one stream per session', async () => {
      const session = await openSession(url, {}, ALICE);
      const headers = { ...sessionHeaders(session, ALICE), accept: 'text/event-stream' };
      const stream = await openStream(url, { method: 'GET', headers });
      try {
        expect(stream.status).toBe(200);
        expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
        expect(stream.headers.get('x-accel-buffering')).toBe('no');
        expect(stream.headers.get('cache-control')).toMatch(/no-cache/);
        const priming = await stream.next();
        expect(priming.id).toMatch(/^g_\d+$/);
        expect(priming.retry).toBe(250);
        expect(priming.data).toBe('');

        const second = await rpc(url, undefined, headers, 'GET');
        expect(second.status).toBe(409);
        expect(second.json.error.message).toMatch(/Conflict/);
      } finally {
        stream.close();
      }
    });

    it('sends keep-alive comments on an idle stream (SSE_KEEPALIVE_MS=1000)', async () => {
      const session = await openSession(url, {}, ALICE);
      const raw = await readRawFor(
        url,
        { ...sessionHeaders(session, ALICE), accept: 'text/event-stream' },
        1600,
      );
      expect(raw.status).toBe(200);
      expect(raw.text).toMatch(/^id: g_\d+\nretry: 250\ndata: \n\n/);
      expect(raw.text).toMatch(/\n: keep-alive\n\n/);
    });

    it("a Last-Event-ID from another session's stream replays nothing of it", async () => {
      const sessionA = await openSession(url, {}, ALICE);
      const sessionB = await openSession(url, {}, ALICE);
      const onA = await rpc(
        url,
        {
          jsonrpc: '2.0',
          id: 6,
          method: 'tools/call',
          params: { name: 'test_tool_with_progress', arguments: {}, _meta: { progressToken: 'a' } },
        },
        sessionHeaders(sessionA, ALICE),
      );
      const priming = onA.events[0];
      expect(priming.id).toBeDefined();

      // Session B presents A's event id: it must get its own fresh stream, never A's events.
      const stream = await openStream(url, {
        method: 'GET',
        headers: {
          ...sessionHeaders(sessionB, ALICE),
          accept: 'text/event-stream',
          'last-event-id': priming.id!,
        },
      });
      try {
        expect(stream.status).toBe(200);
        const first = await stream.next();
        expect(first.id).toMatch(/^g_\d+$/);
        expect(first.data).toBe('');
        await expect(stream.next(500)).rejects.toThrow('no SSE event in time');
      } finally {
        stream.close();
      }
      // The same id on session A does replay A's events, so the id itself was a valid one.
      const own = await rpc(
        url,
        undefined,
        { ...sessionHeaders(sessionA, ALICE), accept: 'text/event-stream', 'last-event-id': priming.id! },
        'GET',
      );
      expect(
        own.events.filter((e) => e.data !== '').map((e) => e.json.params?.progress ?? 'response'),
      ).toEqual([0, 50, 100, 'response']);
    });

    it('delivers a server-to-client request on the POST stream and takes the answer by POST (202)', async () => {
      const session = await openSession(url, { elicitation: {} }, ALICE);
      const call = await openStream(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...sessionHeaders(session, ALICE),
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 8,
          method: 'tools/call',
          params: { name: 'test_elicitation', arguments: { message: 'name?' } },
        }),
      });
      try {
        await call.next(); // priming
        const ask = await call.next();
        expect(ask.json).toMatchObject({
          method: 'elicitation/create',
          params: { message: 'name?', mode: 'form' },
        });
        expect(typeof ask.json.id).toBe('string');
        // Another principal cannot answer it.
        const foreign = await rpc(
          url,
          { jsonrpc: '2.0', id: ask.json.id, result: { action: 'decline' } },
          sessionHeaders(session, BOB),
        );
        expect(foreign.status).toBe(404);
        const answer = await rpc(
          url,
          {
            jsonrpc: '2.0',
            id: ask.json.id,
            result: { action: 'accept', content: { username: 'al', email: 'a@b.c' } },
          },
          sessionHeaders(session, ALICE),
        );
        expect(answer.status).toBe(202);
        const done = await call.next();
        expect(done.json).toMatchObject({
          id: 8,
          result: {
            content: [{ text: 'User response: action=accept, content={"username":"al","email":"a@b.c"}' }],
          },
        });
      } finally {
        call.close();
      }
    });
  });
});
