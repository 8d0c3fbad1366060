import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { createHmac } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { McpTool, type ToolContext } from '../../src/tool-dispatch/index.js';
import {
  MODERN,
  modernCall,
  modernHeaders,
  modernMeta,
  openStream,
  rpc,
  type RpcAnswer,
} from '../support/mcp-http.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const PROXY_SECRET = 'proxy-secret-modern-0123456789';
const STATE_SECRET = 'e2e-mrtr-state-secret-0123456789abcdef';
const ALICE = { 'x-auth-proxy-secret': PROXY_SECRET, 'x-forwarded-user': 'alice' };
const BOB = { 'x-auth-proxy-secret': PROXY_SECRET, 'x-forwarded-user': 'bob' };

/** What the slow test tool saw, so a test can tell a cancelled call from a finished one. */
const slowRuns: { id: string; aborted?: string; finished: boolean }[] = [];

/**
 * Test-only tool, added beside the real modules: it reports progress (so the answer is an SSE stream the
 * client can close), then waits `ms` honouring ctx.signal, recording whether it was aborted.
 */
@Injectable()
class SlowToolProbe {
  @McpTool({
    name: 'e2e_slow',
    description: 'Waits, honouring cancellation.',
    input: {
      type: 'object',
      properties: { id: { type: 'string' }, ms: { type: 'integer' } },
      required: ['id', 'ms'],
    },
  })
  async slow(args: { id: string; ms: number }, ctx: ToolContext): Promise<string> {
    const run: (typeof slowRuns)[number] = { id: args.id, finished: false };
    slowRuns.push(run);
    ctx.signal.addEventListener('abort', () => {
      run.aborted = ctx.signal.reason instanceof Error ? ctx.signal.reason.message : 'aborted';
    });
    await ctx.progress({ progress: 0, total: 1 });
    await sleep(args.ms, undefined, { signal: ctx.signal });
    run.finished = true;
    await ctx.progress({ progress: 1, total: 1 });
    return `slept ${args.ms}`;
  }
}

@Module({ providers: [SlowToolProbe] })
class SlowToolModule {}

async function until<T>(pred: () => T | undefined, ms = 3000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = pred();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(20);
  }
}

function b64(text: string): string {
  return `=?base64?${Buffer.from(text, 'utf8').toString('base64')}?=`;
}

/** Re-signs a requestState with the configured secret after editing its payload (server format: body.mac). */
function resign(state: string, edit: (payload: Record<string, unknown>) => void): string {
  const [body] = state.split('.');
  const payload = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Record<string, unknown>;
  edit(payload);
  const newBody = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${newBody}.${createHmac('sha256', STATE_SECRET).update(newBody).digest('base64url')}`;
}

function expectError(a: RpcAnswer, status: number, code: number, message?: RegExp): void {
  expect({ status: a.status, code: a.json?.error?.code }).toEqual({ status, code });
  if (message) expect(a.json.error.message).toMatch(message);
}

/**
 * The stateless 2026-07-28 era on raw HTTP (https://modelcontextprotocol.io/specification/2026-07-28/basic,
 * https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/mrtr,
 * https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http).
 */
describe('MCP 2026-07-28 over raw Streamable HTTP', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;

  const call = (
    id: number | string,
    method: string,
    params: Record<string, unknown> = {},
    opts: Parameters<typeof modernCall>[4] = {},
  ): Promise<RpcAnswer> =>
    modernCall(url, id, method, params, { ...opts, headers: { ...ALICE, ...opts.headers } });

  const callTool = (
    id: number | string,
    name: string,
    params: Record<string, unknown> = {},
    opts: Parameters<typeof modernCall>[4] = {},
  ): Promise<RpcAnswer> => call(id, 'tools/call', { name, arguments: {}, ...params }, { name, ...opts });

  beforeAll(async () => {
    db = await createTestDatabase('modern');
    app = await createTestApp(
      db.url,
      {
        MCP_CONFORMANCE_FIXTURES: 'true',
        AUTH_PROVIDERS: 'proxy',
        AUTH_PROXY_SECRET: PROXY_SECRET,
        MRTR_STATE_SECRET: STATE_SECRET,
      },
      [SlowToolModule],
    );
    url = await loopbackUrl(app, '/mcp');
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('server/discover: versions, capabilities, serverInfo in _meta, caching hints', async () => {
    const res = await call(1, 'server/discover');
    expect(res.status).toBe(200);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    const r = res.json.result;
    expect(r.resultType).toBe('complete');
    expect(r.supportedVersions).toEqual([MODERN]);
    expect(r.capabilities).toMatchObject({ tools: {}, resources: {}, prompts: {} });
    expect(r.capabilities.resources.subscribe).toBeUndefined();
    expect(r._meta['io.modelcontextprotocol/serverInfo']).toMatchObject({ name: 'mcp-task-server' });
    expect(r.serverInfo).toBeUndefined();
    expect(Number.isInteger(r.ttlMs)).toBe(true);
    expect(['public', 'private']).toContain(r.cacheScope);
  });

  it('tools/call answers a plain result with resultType complete, tools/list with caching hints', async () => {
    const res = await callTool(2, 'test_simple_text');
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.json).toEqual({
      jsonrpc: '2.0',
      id: 2,
      result: {
        resultType: 'complete',
        content: [{ type: 'text', text: 'This is a simple text response for testing.' }],
        _meta: { 'io.modelcontextprotocol/serverInfo': expect.objectContaining({ name: 'mcp-task-server' }) },
      },
    });
    const list = await call(3, 'tools/list');
    expect(list.json.result).toMatchObject({ resultType: 'complete', cacheScope: expect.any(String) });
    expect(list.json.result.tools.find((t: { name: string }) => t.name === 'test_simple_text')).toBeDefined();
    // No legacy task annotations in this era.
    expect(list.json.result.tools.some((t: Record<string, unknown>) => 'execution' in t)).toBe(false);
  });

  describe('the per-request envelope', () => {
    it('refuses a request without _meta, or without its required fields: -32602, HTTP 400', async () => {
      const headers = { ...modernHeaders('tools/list'), ...ALICE };
      const without = await rpc(url, { jsonrpc: '2.0', id: 4, method: 'tools/list', params: {} }, headers);
      expectError(without, 400, -32602, /_meta/);
      const noParams = await rpc(url, { jsonrpc: '2.0', id: 4, method: 'tools/list' }, headers);
      expectError(noParams, 400, -32602);

      const meta = modernMeta();
      for (const field of [
        'io.modelcontextprotocol/protocolVersion',
        'io.modelcontextprotocol/clientCapabilities',
      ]) {
        const partial = { ...meta };
        delete partial[field];
        const res = await rpc(
          url,
          { jsonrpc: '2.0', id: 5, method: 'tools/list', params: { _meta: partial } },
          headers,
        );
        expectError(res, 400, -32602, new RegExp(field.replace('/', '\\/')));
      }
      const badInfo = await rpc(
        url,
        {
          jsonrpc: '2.0',
          id: 6,
          method: 'tools/list',
          params: { _meta: { ...meta, 'io.modelcontextprotocol/clientInfo': 'me' } },
        },
        headers,
      );
      expectError(badInfo, 400, -32602, /clientInfo/);
    });

    it('refuses an MCP-Protocol-Version header that differs from _meta: -32020, HTTP 400', async () => {
      const res = await call(7, 'tools/list', {}, { headers: { 'mcp-protocol-version': '2025-11-25' } });
      expectError(res, 400, -32020, /MCP-Protocol-Version/);
    });

    it('refuses an unsupported version with -32022 naming the supported ones', async () => {
      const res = await rpc(
        url,
        {
          jsonrpc: '2.0',
          id: 8,
          method: 'tools/list',
          params: {
            _meta: { ...modernMeta(), 'io.modelcontextprotocol/protocolVersion': '2099-01-01' },
          },
        },
        { ...modernHeaders('tools/list'), 'mcp-protocol-version': '2099-01-01', ...ALICE },
      );
      expectError(res, 400, -32022);
      expect(res.json.error.data).toEqual({ supported: [MODERN], requested: '2099-01-01' });
    });

    it('refuses a missing or mismatched Mcp-Method: -32020', async () => {
      const mismatch = await call(9, 'tools/list', {}, { headers: { 'mcp-method': 'prompts/list' } });
      expectError(mismatch, 400, -32020, /Mcp-Method/);
      const body = { jsonrpc: '2.0', id: 10, method: 'tools/list', params: { _meta: modernMeta() } };
      const missing = await rpc(url, body, { 'mcp-protocol-version': MODERN, ...ALICE });
      expectError(missing, 400, -32020, /Mcp-Method header is required/);
      // The base64 form of the right value is the same value.
      const encoded = await call(11, 'tools/list', {}, { headers: { 'mcp-method': b64('tools/list') } });
      expect(encoded.status).toBe(200);
    });

    it('checks Mcp-Name against the body, accepting the =?base64?…?= form of a UTF-8 name', async () => {
      const mismatch = await callTool(12, 'test_simple_text', {}, { name: 'test_error_handling' });
      expectError(mismatch, 400, -32020, /Mcp-Name/);
      const missing = await rpc(
        url,
        {
          jsonrpc: '2.0',
          id: 13,
          method: 'tools/call',
          params: { name: 'test_simple_text', arguments: {}, _meta: modernMeta() },
        },
        { ...modernHeaders('tools/call'), ...ALICE },
      );
      expectError(missing, 400, -32020, /Mcp-Name header is required/);

      const ok = await callTool(14, 'test_simple_text', {}, { name: b64('test_simple_text') });
      expect(ok.json.result.resultType).toBe('complete');

      const uri = 'test://template/Zürich-東京/data';
      const read = await call(15, 'resources/read', { uri }, { name: b64(uri) });
      expect(read.status).toBe(200);
      expect(JSON.parse(read.json.result.contents[0].text)).toMatchObject({ id: 'Zürich-東京' });
      const wrong = await call(16, 'resources/read', { uri }, { name: b64('test://template/Zurich/data') });
      expectError(wrong, 400, -32020);
      const invalid = await call(17, 'resources/read', { uri }, { name: '=?base64?not*base64?=' });
      expectError(invalid, 400, -32020, /invalid base64/);
    });

    it('answers methods this era removed with 404 and -32601', async () => {
      for (const [method, params] of [
        [
          'initialize',
          { protocolVersion: MODERN, capabilities: {}, clientInfo: { name: 'x', version: '1' } },
        ],
        ['ping', {}],
        ['logging/setLevel', { level: 'info' }],
        ['resources/subscribe', { uri: 'test://static-text' }],
        ['tasks/list', {}],
        ['no/such/method', {}],
      ] as const) {
        const res = await call(18, method, params);
        expect({ method, status: res.status, code: res.json?.error?.code }).toEqual({
          method,
          status: 404,
          code: -32601,
        });
        expect(res.headers.get('mcp-session-id')).toBeNull();
      }
    });
  });

  describe('MRTR', () => {
    const tool = 'test_input_required_result_elicitation';
    const caps = { elicitation: {} };

    async function roundOne(headers = ALICE): Promise<{ requestState: string; inputRequests: any }> {
      const res = await callTool(20, tool, {}, { caps, headers });
      expect(res.status).toBe(200);
      const r = res.json.result;
      expect(r.resultType).toBe('input_required');
      return r;
    }

    it('round 1 asks with inputRequests and requestState; round 2 with the answers completes', async () => {
      const r1 = await roundOne();
      expect(r1.inputRequests).toEqual({
        user_name: {
          method: 'elicitation/create',
          params: expect.objectContaining({ message: 'What is your name?' }),
        },
      });
      expect(typeof r1.requestState).toBe('string');
      const r2 = await callTool(
        21,
        tool,
        {
          inputResponses: { user_name: { action: 'accept', content: { name: 'Ada' } } },
          requestState: r1.requestState,
        },
        { caps },
      );
      expect(r2.status).toBe(200);
      expect(r2.json.result).toMatchObject({
        resultType: 'complete',
        content: [{ type: 'text', text: 'Hello, Ada!' }],
      });
      expect(r2.json.result.requestState).toBeUndefined();
    });

    it('refuses a tampered, expired, foreign or misapplied requestState: -32602, HTTP 400', async () => {
      const { requestState } = await roundOne();
      const retry = (
        state: string,
        headers = ALICE,
        args: Record<string, unknown> = {},
      ): Promise<RpcAnswer> =>
        callTool(
          22,
          tool,
          {
            arguments: args,
            inputResponses: { user_name: { action: 'accept', content: { name: 'Eve' } } },
            requestState: state,
          },
          { caps, headers },
        );
      // A correctly signed state with a later expiry is accepted: the forgeries below fail for their reason.
      const fresh = await retry(resign(requestState, (p) => (p.expiresAt = Date.now() + 60_000)));
      expect(fresh.json.result?.resultType).toBe('complete');

      const [body, mac] = requestState.split('.');
      const flipped = `${body.slice(0, -2)}${body.endsWith('A') ? 'B' : 'A'}${body.slice(-1)}.${mac}`;
      expectError(await retry(flipped), 400, -32602, /integrity/);
      expectError(await retry(`${body}.${mac.slice(1)}x`), 400, -32602, /integrity/);
      expectError(await retry('garbage'), 400, -32602, /malformed/);
      expectError(
        await retry(resign(requestState, (p) => (p.expiresAt = Date.now() - 1000))),
        400,
        -32602,
        /expired/,
      );
      expectError(await retry(requestState, BOB), 400, -32602, /another caller/);
      expectError(await retry(requestState, ALICE, { extra: 1 }), 400, -32602, /does not match/);
    });

    it('a tool needing sampling without the capability: -32021 with data.requiredCapabilities', async () => {
      const res = await callTool(23, 'test_missing_capability', {}, { caps: { elicitation: {} } });
      expectError(res, 400, -32021);
      expect(res.json.error.data).toEqual({ requiredCapabilities: { sampling: {} } });
      const declared = await callTool(24, 'test_missing_capability', {}, { caps: { sampling: {} } });
      expect(declared.json.result).toMatchObject({
        resultType: 'input_required',
        inputRequests: { needs_sampling: { method: 'sampling/createMessage' } },
      });
    });
  });

  describe('notifications on the SSE answer', () => {
    it('sends progress notifications before the result when _meta.progressToken is set', async () => {
      const res = await callTool(30, 'test_tool_with_progress', {}, { meta: { progressToken: 'p30' } });
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      expect(res.headers.get('x-accel-buffering')).toBe('no');
      const messages = res.events.filter((e) => e.json).map((e) => e.json);
      expect(messages.slice(0, 3)).toEqual(
        [0, 50, 100].map((progress) => ({
          jsonrpc: '2.0',
          method: 'notifications/progress',
          params: { progressToken: 'p30', progress, total: 100 },
        })),
      );
      expect(messages[3]).toMatchObject({ id: 30, result: { resultType: 'complete' } });
      expect(messages).toHaveLength(4);
      // No resumability in this era: no event ids.
      expect(res.events.every((e) => e.id === undefined)).toBe(true);
    });

    it('sends no log notifications when _meta omits the log level, and sends them when it asks', async () => {
      const quiet = await callTool(31, 'test_tool_with_logging');
      expect(quiet.headers.get('content-type')).toMatch(/^application\/json/);
      expect(quiet.json.result.content[0].text).toBe('Logging test completed');

      const loud = await callTool(
        32,
        'test_tool_with_logging',
        {},
        { meta: { 'io.modelcontextprotocol/logLevel': 'info' } },
      );
      const logs = loud.events.filter((e) => e.json?.method === 'notifications/message');
      expect(logs.map((e) => e.json.params.data)).toEqual([
        'Tool execution started',
        'Tool processing data',
        'Tool execution completed',
      ]);
      const errorsOnly = await callTool(
        33,
        'test_tool_with_logging',
        {},
        { meta: { 'io.modelcontextprotocol/logLevel': 'error' } },
      );
      expect(errorsOnly.json?.result.content[0].text).toBe('Logging test completed');
    });

    it('closing the SSE answer mid-call aborts the handler; an open one lets it finish', async () => {
      const body = (id: string, ms: number): string =>
        JSON.stringify({
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: { name: 'e2e_slow', arguments: { id, ms }, _meta: modernMeta({}, { progressToken: id }) },
        });
      const headers = {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...modernHeaders('tools/call', 'e2e_slow'),
        ...ALICE,
      };
      // Control: nobody hangs up, the call finishes.
      const kept = await rpc(url, JSON.parse(body('kept', 200)), headers);
      expect(kept.events.at(-1)?.json.result.content[0].text).toBe('slept 200');
      expect(slowRuns.find((r) => r.id === 'kept')).toEqual({ id: 'kept', finished: true });

      const stream = await openStream(url, { method: 'POST', headers, body: body('dropped', 5000) });
      const first = await stream.next();
      expect(first.json).toMatchObject({ method: 'notifications/progress', params: { progress: 0 } });
      const t0 = Date.now();
      stream.close();
      const run = await until(() => {
        const r = slowRuns.find((x) => x.id === 'dropped');
        return r?.aborted ? r : undefined;
      });
      expect(Date.now() - t0).toBeLessThan(2000);
      expect(run.aborted).toMatch(/closed the request stream/);
      await sleep(100);
      expect(run.finished).toBe(false);
    });
  });

  describe('Mcp-Param headers (test_custom_headers)', () => {
    const tool = 'test_custom_headers';
    const withHeaders = (
      id: number,
      args: Record<string, unknown>,
      headers: Record<string, string>,
    ): Promise<RpcAnswer> => callTool(id, tool, { arguments: args }, { headers });

    it('accepts headers that match the arguments, plain or base64', async () => {
      const ok = await withHeaders(
        40,
        { region: 'eu-west-1', priority: 5 },
        {
          'mcp-param-region': 'eu-west-1',
          'mcp-param-priority': '5',
        },
      );
      expect(ok.json.result.content[0].text).toBe('region=eu-west-1 priority=5');
      const utf8 = await withHeaders(41, { region: 'Zürich' }, { 'mcp-param-region': b64('Zürich') });
      expect(utf8.json.result.content[0].text).toBe('region=Zürich priority=unset');
    });

    it('refuses a mismatched, missing, superfluous or invalid header: -32020, HTTP 400', async () => {
      expectError(
        await withHeaders(42, { region: 'eu-west-1' }, { 'mcp-param-region': 'us-east-1' }),
        400,
        -32020,
        /Mcp-Param-Region/,
      );
      expectError(await withHeaders(43, { region: 'eu-west-1' }, {}), 400, -32020, /required/);
      expectError(
        await withHeaders(44, { region: 'eu' }, { 'mcp-param-region': 'eu', 'mcp-param-priority': '1' }),
        400,
        -32020,
        /Mcp-Param-Priority/,
      );
      expectError(
        await withHeaders(45, { region: 'eu' }, { 'mcp-param-region': '=?base64?***?=' }),
        400,
        -32020,
        /invalid base64/,
      );
    });
  });
});
