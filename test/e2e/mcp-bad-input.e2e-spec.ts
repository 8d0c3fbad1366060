import { request as httpRequest } from 'node:http';
import { openSession, rpc, sessionHeaders, modernCall, type RpcAnswer } from '../support/mcp-http.js';
import { startServer, stopServer, type ServerProcess } from '../support/server-process.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/** A raw request with any headers (fetch will not let a test forge Host). */
function rawRequest(
  url: string,
  method: string,
  headers: Record<string, string>,
  body?: string | Buffer,
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/**
 * Bad input of every kind against a spawned server process: each gets a precise 4xx (or an in-band
 * JSON-RPC error), never a 500, and the process keeps serving.
 */
describe('bad input on /mcp (spawned server)', () => {
  let db: TestDatabase;
  let server: ServerProcess;
  let url: string;
  let session: string;
  const statuses: number[] = [];

  const send = async (
    body: unknown,
    headers: Record<string, string> = {},
    method = 'POST',
  ): Promise<RpcAnswer> => {
    const a = await rpc(url, body, headers, method);
    statuses.push(a.status);
    return a;
  };
  const inSession = (body: unknown, headers: Record<string, string> = {}): Promise<RpcAnswer> =>
    send(body, { ...sessionHeaders(session), ...headers });
  const errorOf = (a: RpcAnswer): { status: number; code: number | undefined } => ({
    status: a.status,
    code: a.json?.error?.code,
  });

  beforeAll(async () => {
    db = await createTestDatabase('badinput');
    server = await startServer({
      DATABASE_URL: db.url,
      MCP_CONFORMANCE_FIXTURES: 'true',
      HTTP_BODY_LIMIT: '16kb',
    });
    url = `${server.baseUrl}/mcp`;
    session = await openSession(url);
  });
  afterEach(async () => {
    const live = await fetch(`${server.baseUrl}/health/live`);
    expect(live.status).toBe(200);
    expect(server.proc.exitCode).toBeNull();
  });
  afterAll(async () => {
    if (server) await stopServer(server);
    await db.drop();
  });

  it('malformed JSON: -32700, HTTP 400', async () => {
    for (const body of ['{"jsonrpc":"2.0",', '{bad json}', '\u0000\u0001', '{"a":1}}']) {
      const a = await inSession(body);
      expect(errorOf(a)).toEqual({ status: 400, code: -32700 });
      expect(a.json.id).toBeNull();
    }
  });

  it('a content type other than JSON: 415', async () => {
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
    ]) {
      const a = await inSession('{"jsonrpc":"2.0","id":1,"method":"tools/list"}', { 'content-type': type });
      expect(a.status).toBe(415);
    }
    const latin = await inSession('{"jsonrpc":"2.0","id":1,"method":"tools/list"}', {
      'content-type': 'application/json; charset=latin1',
    });
    expect(latin.status).toBe(415);
  });

  it('a body over HTTP_BODY_LIMIT: 413 with a JSON-RPC error', async () => {
    const big = {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'test_simple_text', arguments: { pad: 'x'.repeat(20_000) } },
    };
    const a = await inSession(big);
    expect(a.status).toBe(413);
    expect(a.json.error.message).toMatch(/16kb/);
  });

  it('batches and primitives: -32600, HTTP 400', async () => {
    const bodies = [
      '[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]',
      '[]',
      `${'['.repeat(3000)}${']'.repeat(3000)}`,
      '42',
      '"tools/list"',
      'true',
      'null',
    ];
    for (const body of bodies) {
      const a = await inSession(body);
      expect({ body: body.slice(0, 20), ...errorOf(a) }).toEqual({
        body: body.slice(0, 20),
        status: 400,
        code: -32600,
      });
    }
  });

  it('objects that are not JSON-RPC messages: -32600, HTTP 400, echoing a readable id', async () => {
    const cases: [unknown, unknown][] = [
      [{ jsonrpc: '1.0', id: 3, method: 'tools/list' }, 3],
      [{ id: 4, method: 'tools/list' }, 4],
      [{ jsonrpc: '2.0', id: 5, method: 7 }, 5],
      [{ jsonrpc: '2.0', id: 6, method: '' }, 6],
      [{ jsonrpc: '2.0', id: 7, method: 'tools/list', params: [1, 2] }, 7],
      [{ jsonrpc: '2.0', id: { nested: true }, method: 'tools/list' }, null],
      [{ jsonrpc: '2.0', id: null, method: 'tools/list' }, null],
      [{ jsonrpc: '2.0', id: 8 }, 8],
      [{ jsonrpc: '2.0', id: 9, result: 'not an object' }, 9],
      [{ jsonrpc: '2.0', id: 10, error: { message: 'no code' } }, 10],
      [{ jsonrpc: '2.0', id: 11, method: 'x'.repeat(300) }, 11],
    ];
    for (const [body, id] of cases) {
      const a = await inSession(body);
      expect({ body, ...errorOf(a), id: a.json?.id }).toEqual({ body, status: 400, code: -32600, id });
    }
  });

  it('an unknown method (legacy era): -32601', async () => {
    const a = await inSession({ jsonrpc: '2.0', id: 12, method: 'tools/explode' });
    expect(a.json.error).toMatchObject({ code: -32601, message: expect.stringMatching(/tools\/explode/) });
    expect(a.status).toBeLessThan(500);
  });

  it('invalid params: -32602 naming what is wrong', async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['tools/call', {}, /params\.name/],
      ['tools/call', { name: 42 }, /params\.name/],
      ['tools/call', { name: 'test_simple_text', arguments: [1] }, /params\.arguments/],
      ['tools/call', { name: 'no_such_tool' }, /no_such_tool/],
      ['resources/read', {}, /params\.uri/],
      ['prompts/get', { name: 'test_prompt_with_arguments', arguments: 'x' }, /params\.arguments/],
      [
        'completion/complete',
        { ref: { type: 'ref/nothing' }, argument: { name: 'a', value: '' } },
        /params\.ref/,
      ],
      ['tools/list', { cursor: 'forged' }, /cursor/i],
      ['logging/setLevel', { level: 'loud' }, /params\.level/],
    ];
    for (const [method, params, message] of cases) {
      const a = await inSession({ jsonrpc: '2.0', id: 13, method, params });
      expect({ method, code: a.json?.error?.code }).toEqual({ method, code: -32602 });
      expect(a.json.error.message).toMatch(message);
      expect(a.status).toBeLessThan(500);
    }
  });

  it('invalid tool arguments: -32602 naming every bad field', async () => {
    const a = await inSession({
      jsonrpc: '2.0',
      id: 14,
      method: 'tools/call',
      params: { name: 'test_sampling', arguments: { prompt: 5, colour: 'red' } },
    });
    expect(a.json.error.code).toBe(-32602);
    expect(a.json.error.message).toMatch(/arguments\.prompt/);
    expect(a.json.error.message).toMatch(/arguments\.colour/);
    const missing = await inSession({
      jsonrpc: '2.0',
      id: 15,
      method: 'tools/call',
      params: { name: 'test_custom_headers', arguments: {} },
    });
    expect(missing.json.error.code).toBe(-32602);
    expect(missing.json.error.message).toMatch(/region/);
  });

  it('wrong or garbled headers: 4xx, never 500', async () => {
    const list = { jsonrpc: '2.0', id: 16, method: 'tools/list' };
    const cases: [Record<string, string>, number][] = [
      [{ 'mcp-session-id': '' }, 400],
      [{ 'mcp-session-id': '\t' }, 400],
      [{ 'mcp-session-id': 'x'.repeat(4000) }, 404],
      [{ 'mcp-session-id': "'; DROP TABLE mcp_session; --" }, 404],
      [{ 'mcp-protocol-version': 'yesterday' }, 400],
      [{ accept: '' }, 406],
      [{ accept: 'text/html' }, 406],
    ];
    for (const [headers, status] of cases) {
      const a = await inSession(list, headers);
      expect({ headers, status: a.status }).toEqual({ headers, status });
    }
    // A modern request with a broken envelope.
    const modern = await modernCall(
      url,
      17,
      'tools/list',
      {},
      { caps: [] as unknown as Record<string, unknown> },
    );
    statuses.push(modern.status);
    expect(errorOf(modern)).toEqual({ status: 400, code: -32602 });
  });

  const getWith = (session: string, lastEventId: string, signal: AbortSignal) =>
    fetch(url, {
      headers: { ...sessionHeaders(session), accept: 'text/event-stream', 'last-event-id': lastEventId },
      signal,
    });

  it('garbled Last-Event-ID on GET: a fresh stream, not an error', async () => {
    const fresh = await openSession(url);
    for (const lastEventId of ['garbage', 'g_99999999999999999999', 'p-x_1', '_', 'g_-1']) {
      const controller = new AbortController();
      // One GET stream per session: the previous one is released once the server sees its client drop, so
      // a 409 (stream held) right after the abort below is retried until that release.
      let res = await getWith(fresh, lastEventId, controller.signal);
      for (let i = 0; i < 100 && res.status === 409; i++) {
        await res.body?.cancel();
        await new Promise((r) => setTimeout(r, 20));
        res = await getWith(fresh, lastEventId, controller.signal);
      }
      statuses.push(res.status);
      expect({ lastEventId, status: res.status }).toEqual({ lastEventId, status: 200 });
      controller.abort();
    }
  });

  it('PUT, PATCH and other verbs: 405 with Allow', async () => {
    for (const method of ['PUT', 'PATCH']) {
      const a = await send({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, sessionHeaders(session), method);
      expect(a.status).toBe(405);
      expect(a.headers.get('allow')).toBe('GET, POST, DELETE');
    }
  });

  it('a foreign Host or Origin (DNS rebinding): 403 on every verb', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const base = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...sessionHeaders(session),
    };
    const forged: Record<string, string>[] = [
      { host: 'evil.example.com' },
      { host: `evil.example.com:${server.port}` },
      { origin: 'https://evil.example.com' },
      { origin: 'null' },
    ];
    for (const extra of forged) {
      for (const method of ['POST', 'GET', 'DELETE']) {
        const res = await rawRequest(
          url,
          method,
          { ...base, ...extra },
          method === 'POST' ? body : undefined,
        );
        statuses.push(res.status);
        expect({ extra, method, status: res.status }).toEqual({ extra, method, status: 403 });
        expect(JSON.parse(res.text).error.message).toMatch(/Forbidden/);
      }
    }
    // Loopback Host and Origin are fine, and the session survived the refused DELETEs.
    const ok = await rawRequest(url, 'POST', { ...base, origin: `http://localhost:${server.port}` }, body);
    expect(ok.status).toBe(200);
  });

  it('never answered 500, and the server still serves a real call', async () => {
    expect(statuses.length).toBeGreaterThan(40);
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    const metrics = await (await fetch(`${server.baseUrl}/metrics`)).text();
    expect(metrics).not.toMatch(/status_class="5xx"/);
    const a = await inSession({
      jsonrpc: '2.0',
      id: 99,
      method: 'tools/call',
      params: { name: 'test_simple_text', arguments: {} },
    });
    expect(a.json.result.content[0].text).toBe('This is a simple text response for testing.');
    expect(server.output()).not.toMatch(/unhandled error|Internal error|TypeError/);
  });
});
