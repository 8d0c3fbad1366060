import type { INestApplication } from '@nestjs/common';
import fc from 'fast-check';
import { Agent, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { LEGACY, MODERN, openSession, responseOf, rpc, sessionHeaders } from '../support/mcp-http.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/**
 * The fuzz tier: property-based requests over the HTTP edge of both eras, against the real AppModule on
 * real PostgreSQL. Every generated request must get an answer below 500, the process must keep answering
 * /health/live, and the heap must come back to where it started.
 *
 * FUZZ_SEED fixes the seed (default below, so CI is reproducible; `random` picks one and prints it);
 * FUZZ_RUNS the number of generated requests (default 10,000). A failure prints the seed, the path and the
 * shrunk counterexample (fast-check's report), which replays with FUZZ_SEED=<seed>.
 */

const DEFAULT_SEED = 20261130;
const seed =
  process.env.FUZZ_SEED === 'random'
    ? Math.floor(Math.random() * 2 ** 31)
    : Number(process.env.FUZZ_SEED ?? DEFAULT_SEED);
const numRuns = Number(process.env.FUZZ_RUNS ?? 10_000);
const HEAP_SLACK_BYTES = 10 * 1024 * 1024;
/** A request that has not even started its answer by then is counted, not failed (no 5xx was seen). */
const ANSWER_TIMEOUT_MS = 5000;

// gc() without depending on how jest was started: the flag can be set at run time, then read from a context.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

interface FuzzRequest {
  method: string;
  headers: Record<string, string>;
  body?: string | Buffer;
}

interface Answer {
  status: number;
  contentType: string;
  body: string;
}

const METHODS = [
  'initialize',
  'ping',
  'tools/list',
  'tools/call',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'resources/subscribe',
  'resources/unsubscribe',
  'prompts/list',
  'prompts/get',
  'completion/complete',
  'logging/setLevel',
  'tasks/get',
  'tasks/result',
  'tasks/list',
  'tasks/cancel',
  'tasks/update',
  'subscriptions/listen',
  'server/discover',
  'notifications/initialized',
  'notifications/cancelled',
  'notifications/progress',
];
const TOOLS = [
  'test_simple_text',
  'test_error_handling',
  'test_elicitation',
  'test_sampling',
  'test_input_required_result_elicitation',
  'test_input_required_result_multi_round',
  'test_input_required_result_request_state',
  'test_tool_with_task',
  'greet',
  'failing_job',
  'protocol_error_job',
  'confirm_delete',
  'multi_input',
  'json_schema_2020_12_tool',
];
const PROTOTYPE_KEYS = ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf'];

/** Printable ASCII only: anything else is refused by the client library before it reaches the server. */
const headerText = (max = 40) => fc.stringMatching(new RegExp(`^[\\x20-\\x7e]{0,${max}}$`));
const b64Header = fc.string({ maxLength: 30 }).map((s) => `=?base64?${Buffer.from(s).toString('base64')}?=`);

function nested(depth: number, open: string, close: string, leaf = '1'): string {
  return open.repeat(depth) + leaf + close.repeat(depth);
}

describe('fuzz: the HTTP edge of both eras (real AppModule, real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let port: number;
  let url: string;
  let session: string;
  let sacrificial: string;
  const sessions: string[] = [];
  const taskIds: string[] = [];
  const cursors: string[] = [];
  const eventIds: string[] = [];
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });

  beforeAll(async () => {
    db = await createTestDatabase('fuzz');
    app = await createTestApp(
      db.url,
      {
        MCP_CONFORMANCE_FIXTURES: 'true',
        HTTP_BODY_LIMIT: '256kb',
        // Bounded waits, so that a request the fuzzer abandons frees what it holds quickly.
        CLIENT_REQUEST_TIMEOUT_MS: '1000',
        TASK_RESULT_TIMEOUT_MS: '1000',
        TASK_LIST_PAGE_SIZE: '1',
        SSE_KEEPALIVE_MS: '1000',
        // One client at one address sends everything: rate limits would answer most inputs 429 before they
        // reach the code under test (the quotas e2e tests cover the limiter itself).
        RATE_LIMIT_PRINCIPAL_RPS: '0',
        RATE_LIMIT_ADDRESS_RPS: '0',
      },
      [],
      { logger: ['error'] },
    );
    port = (app.getHttpServer().address() as AddressInfo).port;
    url = `http://127.0.0.1:${port}/mcp`;
    // Real identifiers for the fuzzer to mix in, so it reaches past "not found" into the handlers.
    session = await openSession(url, { elicitation: {}, sampling: {}, roots: {} });
    sessions.push(session, await openSession(url), await openSession(url, { elicitation: {} }));
    sacrificial = await openSession(url);
    for (let i = 0; i < 3; i++) {
      const created = await rpc(
        url,
        {
          jsonrpc: '2.0',
          id: i + 1,
          method: 'tools/call',
          params: { name: 'test_tool_with_task', arguments: {}, task: { ttl: 60000 } },
        },
        sessionHeaders(session),
      );
      const taskId = responseOf(created)?.result?.task?.taskId as string | undefined;
      if (taskId) taskIds.push(taskId);
    }
    const page = await rpc(
      url,
      { jsonrpc: '2.0', id: 9, method: 'tasks/list', params: {} },
      sessionHeaders(session),
    );
    const cursor = responseOf(page)?.result?.nextCursor as string | undefined;
    if (cursor) cursors.push(cursor);
    expect(taskIds.length).toBeGreaterThan(0);
    expect(cursors.length).toBeGreaterThan(0);
    eventIds.push('_0', 'g_1', 'standalone_1', `${'a'.repeat(64)}_99999999999999999999`);
  });
  afterAll(async () => {
    agent.destroy();
    await app.close();
    await db.drop();
  });

  /** Sends one request; reads JSON answers whole and SSE answers only up to their status. */
  function send(r: FuzzRequest): Promise<Answer | 'timeout'> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        { host: '127.0.0.1', port, path: '/mcp', method: r.method, headers: r.headers, agent },
        (res) => {
          clearTimeout(timer);
          const contentType = String(res.headers['content-type'] ?? '');
          const status = res.statusCode ?? 0;
          if (contentType.includes('text/event-stream')) {
            // A stream may stay open for as long as its subject lives: its status is all we judge.
            res.destroy();
            return resolve({ status, contentType, body: '' });
          }
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (body += d));
          res.on('end', () => resolve({ status, contentType, body }));
          res.on('error', () => resolve({ status, contentType, body }));
        },
      );
      const timer = setTimeout(() => {
        req.destroy();
        resolve('timeout');
      }, ANSWER_TIMEOUT_MS);
      req.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      if (r.body !== undefined) req.write(r.body);
      req.end();
    });
  }

  it(
    `answers ${numRuns} generated requests below 500, stays alive and gives its heap back (seed ${seed})`,
    async () => {
      const anyJson = fc.jsonValue({ maxDepth: 4 });
      const junk = fc.oneof(
        anyJson,
        fc.constantFrom(...PROTOTYPE_KEYS),
        fc.string({ maxLength: 300 }),
        fc.integer(),
        fc.double(),
        fc.constant(null),
      );
      const taskId = fc.oneof(
        fc.constantFrom(...taskIds),
        fc.string({ maxLength: 80 }),
        fc.constantFrom(...PROTOTYPE_KEYS, '', ' ', '../../etc', '%00', 'a'.repeat(2000)),
        junk,
      );
      const cursor = fc.oneof(
        fc.constantFrom(...cursors),
        fc.base64String({ maxLength: 80 }),
        fc.string({ maxLength: 80 }),
        junk,
      );
      const meta = fc.oneof(
        fc.record(
          {
            'io.modelcontextprotocol/protocolVersion': fc.oneof(
              fc.constantFrom(MODERN, LEGACY, '2026-07-28 ', ''),
              junk,
            ),
            'io.modelcontextprotocol/clientCapabilities': fc.oneof(
              fc.constantFrom(
                {},
                { extensions: { 'io.modelcontextprotocol/tasks': {} } },
                { elicitation: {} },
              ),
              junk,
            ),
            'io.modelcontextprotocol/clientInfo': fc.oneof(fc.constant({ name: 'fuzz', version: '1' }), junk),
            'io.modelcontextprotocol/logLevel': junk,
            progressToken: junk,
          },
          { requiredKeys: [] },
        ),
        junk,
      );
      const toolArgs = fc.oneof(
        fc.dictionary(fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom(...PROTOTYPE_KEYS)), junk, {
          maxKeys: 4,
        }),
        junk,
      );
      const inputResponses = fc.oneof(
        fc.dictionary(
          fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom('input_1', 'r1.input_1', ...PROTOTYPE_KEYS)),
          fc.oneof(fc.constant({ action: 'accept', content: { name: 'x' } }), junk),
          { maxKeys: 4 },
        ),
        junk,
      );
      const params = fc.oneof(
        {
          weight: 6,
          arbitrary: fc.record(
            {
              name: fc.oneof(
                fc.constantFrom(...TOOLS, 'test_simple_prompt', 'test_prompt_with_arguments'),
                junk,
              ),
              uri: fc.oneof(
                fc.constantFrom('test://static-text', 'test://template/x/data', 'test://watched-resource'),
                fc.constantFrom(...PROTOTYPE_KEYS).map((k) => `test://template/${k}/data`),
                junk,
              ),
              arguments: toolArgs,
              taskId,
              cursor,
              task: fc.oneof(fc.record({ ttl: fc.oneof(fc.integer(), junk) }, { requiredKeys: [] }), junk),
              inputResponses,
              requestState: fc.oneof(fc.base64String({ maxLength: 120 }), junk),
              level: fc.oneof(fc.constantFrom('debug', 'info', 'emergency'), junk),
              ref: junk,
              argument: junk,
              notifications: fc.oneof(
                fc.record(
                  { taskIds: fc.oneof(fc.array(taskId, { maxLength: 3 }), junk), toolsListChanged: junk },
                  { requiredKeys: [] },
                ),
                junk,
              ),
              requestId: junk,
              _meta: meta,
            },
            { requiredKeys: [] },
          ),
        },
        { weight: 1, arbitrary: junk },
      );
      const method = fc.oneof(fc.constantFrom(...METHODS), fc.string({ maxLength: 30 }));
      const envelope = fc.record(
        {
          jsonrpc: fc.oneof(fc.constant('2.0'), junk),
          id: fc.oneof(fc.integer(), fc.string({ maxLength: 20 }), fc.constant(null), junk),
          method,
          params,
          result: junk,
          error: junk,
        },
        { requiredKeys: [] },
      );
      const rawBody = fc.oneof(
        envelope.map((e) => JSON.stringify(e)),
        envelope.map((e) => JSON.stringify(e)),
        envelope.map((e) => JSON.stringify(e)),
        anyJson.map((v) => JSON.stringify(v)),
        fc.array(envelope, { maxLength: 3 }).map((a) => JSON.stringify(a)),
        fc.string({ maxLength: 200 }), // mostly not JSON
        fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
        fc.integer({ min: 1, max: 20000 }).map((d) => nested(d, '[', ']')),
        fc.integer({ min: 1, max: 20000 }).map((d) => nested(d, '{"a":', '}')),
        fc
          .integer({ min: 1, max: 5000 })
          .map((d) =>
            JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: {} }).replace(
              '"params":{}',
              `"params":{"name":"json_schema_2020_12_tool","arguments":${nested(d, '{"x":', '}')}}`,
            ),
          ),
        fc.constant(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }).slice(0, -3)), // truncated
      );
      const headers = fc.record(
        {
          'content-type': fc.oneof(
            fc.constantFrom(
              'application/json',
              'application/json; charset=utf-8',
              'text/plain',
              'application/x+json',
            ),
            fc.constant('application/json; charset=latin-9'),
            headerText(),
          ),
          accept: fc.oneof(
            fc.constant('application/json, text/event-stream'),
            fc.constantFrom('text/event-stream', 'application/json', '*/*'),
            headerText(),
          ),
          'mcp-session-id': fc.oneof(fc.constant(sacrificial), fc.constant(session + 'x'), headerText(60)),
          'mcp-protocol-version': fc.oneof(fc.constantFrom(MODERN, LEGACY, '2099-01-01'), headerText()),
          'mcp-method': fc.oneof(fc.constantFrom(...METHODS), b64Header, headerText()),
          'mcp-name': fc.oneof(
            fc.constantFrom(...TOOLS, ...taskIds),
            b64Header,
            fc.constant('=?base64?***?='),
            headerText(),
          ),
          'mcp-param-region': headerText(),
          'last-event-id': fc.oneof(fc.constantFrom(...eventIds), headerText(80)),
          'content-encoding': fc.constantFrom('gzip', 'identity', 'br'),
          origin: fc.constantFrom('http://evil.example', `http://127.0.0.1:0`, 'null'),
          authorization: fc.oneof(fc.constant('Bearer mcpk_aaaaaaaaaaaa_' + 'b'.repeat(43)), headerText()),
        },
        { requiredKeys: [] },
      );
      // Well-formed enough to pass the edge (content type, accept, origin, era headers agreeing with the
      // body), so most requests reach the handlers with generated params; one header is sometimes broken.
      const wellFormed = fc
        .record({
          modern: fc.boolean(),
          id: fc.oneof(fc.integer(), fc.string({ maxLength: 20 })),
          method: fc.constantFrom(...METHODS),
          params: fc
            .dictionary(fc.string({ maxLength: 8 }), junk, { maxKeys: 2 })
            .chain((extra) =>
              params.map((p) =>
                typeof p === 'object' && p !== null && !Array.isArray(p) ? { ...extra, ...p } : p,
              ),
            ),
          validMeta: fc.oneof(
            { weight: 5, arbitrary: fc.constant(true) },
            { weight: 1, arbitrary: fc.constant(false) },
          ),
          sessionId: fc.constantFrom(...sessions),
          notification: fc.boolean(),
          broken: fc.option(
            fc.tuple(
              fc.constantFrom(
                'mcp-session-id',
                'mcp-protocol-version',
                'mcp-method',
                'mcp-name',
                'last-event-id',
              ),
              headerText(),
            ),
            { freq: 4 },
          ),
        })
        .map(({ modern, id, method, params: p, validMeta, sessionId, notification, broken }): FuzzRequest => {
          const body: Record<string, unknown> = { jsonrpc: '2.0', method };
          if (!(notification && method.startsWith('notifications/'))) body.id = id;
          let sent = p;
          const h: Record<string, string> = {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          };
          if (modern) {
            const obj =
              typeof p === 'object' && p !== null && !Array.isArray(p) ? (p as Record<string, unknown>) : {};
            const given = typeof obj._meta === 'object' && obj._meta !== null ? obj._meta : {};
            sent = {
              ...obj,
              _meta: validMeta
                ? {
                    ...given,
                    'io.modelcontextprotocol/protocolVersion': MODERN,
                    'io.modelcontextprotocol/clientCapabilities': {
                      extensions: { 'io.modelcontextprotocol/tasks': {} },
                      elicitation: {},
                    },
                    'io.modelcontextprotocol/clientInfo': { name: 'fuzz', version: '1.0.0' },
                  }
                : given,
            };
            h['mcp-protocol-version'] = MODERN;
            h['mcp-method'] = method;
            const field =
              { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri' }[method] ?? 'taskId';
            const named = (sent as Record<string, unknown>)[field];
            if (typeof named === 'string')
              h['mcp-name'] = `=?base64?${Buffer.from(named).toString('base64')}?=`;
          } else {
            h['mcp-session-id'] = sessionId;
            h['mcp-protocol-version'] = LEGACY;
          }
          body.params = sent;
          if (broken) h[broken[0]] = broken[1];
          return { method: 'POST', headers: h, body: JSON.stringify(body) };
        });
      const streamOrEnd = fc
        .record({
          method: fc.constantFrom('GET', 'GET', 'GET', 'DELETE'),
          sessionId: fc.oneof(fc.constantFrom(...sessions), headerText(60)),
          lastEventId: fc.option(fc.oneof(fc.constantFrom(...eventIds), headerText(80))),
          version: fc.option(fc.oneof(fc.constantFrom(LEGACY, MODERN), headerText())),
        })
        .map(({ method, sessionId, lastEventId, version }): FuzzRequest => ({
          method,
          headers: {
            accept: 'text/event-stream',
            // DELETE only ever ends the sacrificial session, so the others keep reaching the handlers.
            'mcp-session-id': method === 'DELETE' && sessions.includes(sessionId) ? sacrificial : sessionId,
            ...(lastEventId !== null && { 'last-event-id': lastEventId }),
            ...(version !== null && { 'mcp-protocol-version': version }),
          },
        }));
      const requestArb: fc.Arbitrary<FuzzRequest> = fc.oneof(
        { weight: 12, arbitrary: wellFormed },
        { weight: 3, arbitrary: fc.record({ method: fc.constant('POST'), headers, body: rawBody }) },
        { weight: 2, arbitrary: streamOrEnd },
        { weight: 1, arbitrary: fc.record({ method: fc.constantFrom('GET', 'DELETE'), headers }) },
        {
          weight: 1,
          arbitrary: fc.record({
            method: fc.constantFrom('PUT', 'PATCH', 'OPTIONS', 'HEAD'),
            headers,
            body: rawBody,
          }),
        },
      );

      const warmUp = fc.sample(requestArb, { numRuns: 200, seed: seed + 1 });
      for (const r of warmUp) await send(r);
      gc();
      const heapBefore = process.memoryUsage().heapUsed;

      let timeouts = 0;
      const reasons = new Map<string, number>();
      const statuses = new Map<number, number>();
      const started = Date.now();
      await fc.assert(
        fc.asyncProperty(requestArb, async (r) => {
          const answer = await send(r);
          if (answer === 'timeout') {
            timeouts++;
            return true;
          }
          statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
          if (process.env.FUZZ_DEBUG) {
            const m = /"message":"([^"]{0,60})/.exec(answer.body);
            const k = `${answer.status} ${m?.[1] ?? ''}`;
            reasons.set(k, (reasons.get(k) ?? 0) + 1);
          }
          if (answer.status >= 500) {
            throw new Error(`HTTP ${answer.status}: ${answer.body.slice(0, 500)}`);
          }
          // An in-band internal error of the server is a 500 in disguise (a fixture tool may send -32603
          // with its own message on purpose; the server's own says "Internal error").
          if (
            answer.contentType.includes('json') &&
            /"code":-32603,"message":"Internal error/.test(answer.body)
          ) {
            throw new Error(`JSON-RPC internal error: ${answer.body.slice(0, 500)}`);
          }
          return true;
        }),
        { seed, numRuns, endOnFailure: false },
      );
      const seconds = (Date.now() - started) / 1000;
      if (process.env.FUZZ_DEBUG) {
        const top = [...reasons].sort((a, b) => b[1] - a[1]).slice(0, 25);
        process.stdout.write(`fuzz answers:\n${top.map(([k, n]) => `  ${n} ${k}`).join('\n')}\n`);
      }

      // Still alive: liveness answers, and a well-formed request still works.
      const live = await fetch(`http://127.0.0.1:${port}/health/live`);
      expect(live.status).toBe(200);
      // (The fuzzer may well have DELETEd the seeded session: a new one must open and answer.)
      const fresh = await openSession(url);
      const ping = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'ping' }, sessionHeaders(fresh));
      expect(responseOf(ping)).toEqual({ jsonrpc: '2.0', id: 1, result: {} });

      // Streams the fuzzer dropped close on the server within a keep-alive; then the heap must be back.
      await new Promise((r) => setTimeout(r, 3000));
      gc();
      const heapAfter = process.memoryUsage().heapUsed;
      process.stdout.write(
        `fuzz: seed ${seed}, ${numRuns} requests in ${seconds.toFixed(1)} s, statuses ${JSON.stringify(
          Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])),
        )}, ${timeouts} without an answer in ${ANSWER_TIMEOUT_MS} ms, heap ${(heapBefore / 1048576).toFixed(1)} -> ${(
          heapAfter / 1048576
        ).toFixed(1)} MB\n`,
      );
      expect(heapAfter - heapBefore).toBeLessThan(HEAP_SLACK_BYTES);
    },
    20 * 60_000,
  );
});
