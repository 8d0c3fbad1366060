import type { INestApplication } from '@nestjs/common';
import fc from 'fast-check';
import { Agent, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import {
  LEGACY,
  MODERN,
  modernMeta,
  openSession,
  openStream,
  responseOf,
  rpc,
  sessionHeaders,
} from '../support/mcp-http.js';
import { EXT_CAPS, waitFor } from '../support/tasks-e2e.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/**
 * The fuzz tier, wide and deep JSON (issue 19): objects with many keys, deep nesting, and both at once,
 * around and far past JSON_MAX_OBJECT_KEYS, JSON_MAX_DEPTH and JSON_MAX_NODES, placed in tool arguments
 * (both eras, inline, as tasks, MRTR rounds), `_meta`, initialize capabilities, tasks/update inputs,
 * prompt and completion arguments, and client responses (stray ones, and real answers to an elicitation
 * the server is waiting for). Every answer must be below 500 and never the server's own -32603, a waiting
 * call must get its answer, and the server's event loop must never stall for 100 ms.
 *
 * FUZZ_SEED as in http-edge.fuzz-spec.ts; FUZZ_WIDE_DEEP_RUNS the number of generated bodies (default 150;
 * a fifth as many live elicitation answers).
 */

const DEFAULT_SEED = 20261201;
const seed =
  process.env.FUZZ_SEED === 'random'
    ? Math.floor(Math.random() * 2 ** 31)
    : Number(process.env.FUZZ_SEED ?? DEFAULT_SEED);
const numRuns = Number(process.env.FUZZ_WIDE_DEEP_RUNS ?? 150);
const MAX_LOOP_DELAY_MS = 100;
const ANSWER_TIMEOUT_MS = 10_000;
/** The defaults (ProtocolConfig): the generators aim at both sides of each. */
const MAX_DEPTH = 64;
const MAX_KEYS = 1000;
const MAX_NODES = 100_000;

type Shape =
  | { kind: 'wide'; keys: number }
  | { kind: 'deepArray' | 'deepObject'; depth: number }
  | { kind: 'wideOfWide'; outer: number; inner: number }
  | { kind: 'deepThenWide'; depth: number; keys: number }
  | { kind: 'longArray'; length: number };

function wide(keys: number, value = '1'): string {
  const parts = new Array<string>(keys);
  for (let i = 0; i < keys; i++) parts[i] = `"k${i}":${value}`;
  return `{${parts.join(',')}}`;
}

/** The JSON text of a shape, built as text: generating values and stringifying them would be the slow part. */
function render(shape: Shape): string {
  switch (shape.kind) {
    case 'wide':
      return wide(shape.keys);
    case 'deepArray':
      return '['.repeat(shape.depth) + ']'.repeat(shape.depth);
    case 'deepObject':
      return '{"a":'.repeat(shape.depth) + 'null' + '}'.repeat(shape.depth);
    case 'wideOfWide':
      return wide(shape.outer, wide(shape.inner));
    case 'deepThenWide':
      return '{"a":'.repeat(shape.depth) + wide(shape.keys) + '}'.repeat(shape.depth);
    case 'longArray':
      return `[${new Array<string>(shape.length).fill('0').join(',')}]`;
  }
}

const around = (limit: number, spread: number) => fc.integer({ min: limit - spread, max: limit + spread });
const shapeArb: fc.Arbitrary<Shape> = fc.oneof(
  fc.record({
    kind: fc.constant('wide' as const),
    keys: fc.oneof(around(MAX_KEYS, 5), fc.integer({ min: 0, max: 120_000 })),
  }),
  fc.record({
    kind: fc.constantFrom('deepArray' as const, 'deepObject' as const),
    depth: fc.oneof(around(MAX_DEPTH - 8, 10), fc.integer({ min: 0, max: 200_000 })),
  }),
  fc.record({
    kind: fc.constant('wideOfWide' as const),
    outer: fc.integer({ min: 1, max: 110 }),
    inner: around(MAX_KEYS - 5, 10),
  }),
  fc.record({
    kind: fc.constant('deepThenWide' as const),
    depth: fc.integer({ min: 1, max: MAX_DEPTH + 4 }),
    keys: fc.oneof(around(MAX_KEYS, 3), fc.integer({ min: 0, max: 5000 })),
  }),
  fc.record({ kind: fc.constant('longArray' as const), length: around(MAX_NODES - 10, 20) }),
);

type Place =
  | 'legacyArguments'
  | 'legacyTaskArguments'
  | 'modernArguments'
  | 'modernTaskArguments'
  | 'modernMeta'
  | 'mrtrInputResponses'
  | 'tasksUpdate'
  | 'initializeCapabilities'
  | 'promptArguments'
  | 'completionArguments'
  | 'strayResponse'
  | 'strayErrorData';

const TOOLS = ['test_elicitation', 'json_schema_2020_12_tool', 'test_simple_text', 'multi_input', 'greet'];

interface Answer {
  status: number;
  contentType: string;
  body: string;
}

describe('fuzz: wide and deep JSON everywhere a client can put it (real AppModule, real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let port: number;
  let url: string;
  let session: string;
  const parkedTasks: string[] = [];
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  const histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: 5 });

  beforeAll(async () => {
    db = await createTestDatabase('fuzzwide');
    app = await createTestApp(
      db.url,
      {
        MCP_CONFORMANCE_FIXTURES: 'true',
        CLIENT_REQUEST_TIMEOUT_MS: '1000',
        RATE_LIMIT_PRINCIPAL_RPS: '0',
        RATE_LIMIT_ADDRESS_RPS: '0',
      },
      [],
      { logger: ['error'] },
    );
    port = (app.getHttpServer().address() as AddressInfo).port;
    url = `http://127.0.0.1:${port}/mcp`;
    session = await openSession(url, { elicitation: {}, sampling: {}, roots: {} });
    // Tasks parked at input_required, so that tasks/update reaches a task that takes input.
    for (let i = 0; i < 2; i++) {
      const created = responseOf(
        await rpc(
          url,
          {
            jsonrpc: '2.0',
            id: i + 1,
            method: 'tools/call',
            params: {
              name: 'multi_input',
              arguments: {},
              _meta: modernMeta({ elicitation: {}, ...EXT_CAPS }),
            },
          },
          { 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'multi_input' },
        ),
      );
      const taskId = created?.result?.taskId as string | undefined;
      if (!taskId) throw new Error(`no task: ${JSON.stringify(created)}`);
      await waitFor(
        async () =>
          responseOf(
            await rpc(
              url,
              { jsonrpc: '2.0', id: 9, method: 'tasks/get', params: { taskId, _meta: modernMeta(EXT_CAPS) } },
              { 'mcp-protocol-version': MODERN, 'mcp-method': 'tasks/get', 'mcp-name': taskId },
            ),
          )?.result,
        (t) => t?.status === 'input_required',
        { what: 'multi_input input_required' },
      );
      parkedTasks.push(taskId);
    }
  });
  afterAll(async () => {
    agent.destroy();
    await app.close();
    await db.drop();
  });

  /**
   * The longest event-loop stall seen while one case was in the server's hands, and which case it was. A
   * case that stalled past the limit is replayed (up to 3 times) and counts with its shortest stall: on a
   * shared machine the scheduler alone can hold a process for 100 ms, but work that really blocks the loop
   * blocks it every time.
   */
  const worst = { ms: 0, what: '' };
  let suspects: { what: string; ms: number; replay: () => Promise<unknown> }[] = [];
  async function stallOf(work: () => Promise<unknown>): Promise<number> {
    histogram.reset();
    histogram.enable();
    try {
      await work();
    } finally {
      histogram.disable();
    }
    return histogram.max / 1e6;
  }
  async function measured<T>(what: string, work: () => Promise<T>): Promise<T> {
    let result: T | undefined;
    const ms = await stallOf(async () => (result = await work()));
    if (ms >= MAX_LOOP_DELAY_MS) suspects.push({ what, ms, replay: work });
    else if (ms > worst.ms) Object.assign(worst, { ms, what });
    return result as T;
  }
  async function confirmStalls(): Promise<number> {
    for (const [i, suspect] of suspects.entries()) {
      let ms = suspect.ms;
      // More than a few slow cases is a finding in itself: those beyond the first 10 count as measured.
      for (let attempt = 0; i < 10 && attempt < 3 && ms >= MAX_LOOP_DELAY_MS; attempt++) {
        ms = Math.min(ms, await stallOf(suspect.replay));
      }
      if (ms > worst.ms) Object.assign(worst, { ms, what: suspect.what });
    }
    const replayed = suspects.length;
    suspects = [];
    return replayed;
  }

  /** Sends one POST; SSE answers are judged by their status. */
  function send(body: string, headers: Record<string, string>): Promise<Answer | 'timeout'> {
    return new Promise((resolve, reject) => {
      const done = (a: Answer | 'timeout'): void => resolve(a);
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          path: '/mcp',
          method: 'POST',
          agent,
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            ...headers,
          },
        },
        (res) => {
          clearTimeout(timer);
          const contentType = String(res.headers['content-type'] ?? '');
          const status = res.statusCode ?? 0;
          if (contentType.includes('text/event-stream')) {
            res.destroy();
            return done({ status, contentType, body: '' });
          }
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (text += d));
          res.on('end', () => done({ status, contentType, body: text }));
          res.on('error', () => done({ status, contentType, body: text }));
        },
      );
      const timer = setTimeout(() => {
        req.destroy();
        done('timeout');
      }, ANSWER_TIMEOUT_MS);
      req.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      req.end(body);
    });
  }

  function modernBody(
    id: number,
    method: string,
    params: string,
    caps: Record<string, unknown> = {},
  ): string {
    const meta = JSON.stringify(modernMeta({ elicitation: {}, ...caps }));
    return `{"jsonrpc":"2.0","id":${id},"method":"${method}","params":{"_meta":${meta},${params}}}`;
  }

  const modernHeaders = (method: string, name?: string): Record<string, string> => ({
    'mcp-protocol-version': MODERN,
    'mcp-method': method,
    ...(name !== undefined ? { 'mcp-name': name } : {}),
  });

  function request(place: Place, x: string, tool: string, task: number): [string, Record<string, string>] {
    const legacy = sessionHeaders(session);
    const call = (extra = '') =>
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"${tool}"${extra},"arguments":${x}}}`;
    switch (place) {
      case 'legacyArguments':
        return [call(), legacy];
      case 'legacyTaskArguments':
        return [call(',"task":{"ttl":60000}'), legacy];
      case 'modernArguments':
        return [
          modernBody(2, 'tools/call', `"name":"${tool}","arguments":${x}`),
          modernHeaders('tools/call', tool),
        ];
      case 'modernTaskArguments':
        return [
          modernBody(3, 'tools/call', `"name":"${tool}","arguments":${x}`, EXT_CAPS),
          modernHeaders('tools/call', tool),
        ];
      case 'modernMeta': {
        const meta = JSON.stringify(modernMeta({ elicitation: {} })).slice(0, -1);
        return [
          `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"test_simple_text","_meta":${meta},"x-fuzz":${x}}}}`,
          modernHeaders('tools/call', 'test_simple_text'),
        ];
      }
      case 'mrtrInputResponses':
        return [
          modernBody(
            5,
            'tools/call',
            `"name":"test_input_required_result_elicitation","arguments":{},"inputResponses":{"input_1":${x}}`,
          ),
          modernHeaders('tools/call', 'test_input_required_result_elicitation'),
        ];
      case 'tasksUpdate': {
        const taskId = parkedTasks[task % parkedTasks.length];
        return [
          modernBody(
            6,
            'tasks/update',
            `"taskId":"${taskId}","inputResponses":{"first":${x},"second":${x}}`,
            EXT_CAPS,
          ),
          modernHeaders('tasks/update', taskId),
        ];
      }
      case 'initializeCapabilities':
        return [
          `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"${LEGACY}",` +
            `"clientInfo":{"name":"fuzz","version":"1"},"capabilities":{"experimental":${x}}}}`,
          {},
        ];
      case 'promptArguments':
        return [
          `{"jsonrpc":"2.0","id":8,"method":"prompts/get","params":{"name":"test_prompt_with_arguments","arguments":${x}}}`,
          legacy,
        ];
      case 'completionArguments':
        return [
          `{"jsonrpc":"2.0","id":9,"method":"completion/complete","params":{"ref":{"type":"ref/prompt",` +
            `"name":"test_prompt_with_arguments"},"argument":{"name":"arg1","value":"a"},"context":{"arguments":${x}}}}`,
          legacy,
        ];
      case 'strayResponse':
        return [`{"jsonrpc":"2.0","id":"srv-fuzz","result":{"action":"accept","content":${x}}}`, legacy];
      case 'strayErrorData':
        return [`{"jsonrpc":"2.0","id":"srv-fuzz","error":{"code":-1,"message":"no","data":${x}}}`, legacy];
    }
  }

  /** One elicitation of a call, answered with the given shape: the call must end, and not as a server fault. */
  async function answerElicitation(asError: boolean, text: string): Promise<void> {
    const call = await openStream(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...sessionHeaders(session),
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 77,
        method: 'tools/call',
        params: { name: 'test_elicitation', arguments: { message: 'name?' } },
      }),
    });
    try {
      await call.next(); // priming
      const ask = await call.next();
      expect(ask.json).toMatchObject({ method: 'elicitation/create' });
      const id = JSON.stringify(ask.json.id);
      const body = asError
        ? `{"jsonrpc":"2.0","id":${id},"error":{"code":-1,"message":"no","data":${text}}}`
        : `{"jsonrpc":"2.0","id":${id},"result":{"action":"accept","content":${text}}}`;
      const posted = await send(body, sessionHeaders(session));
      if (posted === 'timeout') throw new Error('the answer was not acknowledged');
      judge(posted);
      // The call ends, with a result or an error, long before it would have timed out on its own.
      const done = await call.next(ANSWER_TIMEOUT_MS);
      expect(done.json?.id).toBe(77);
      if (done.json.error) expect(done.json.error.message).not.toMatch(/^Internal error/);
    } finally {
      call.close();
    }
  }

  function judge(answer: Answer): void {
    if (answer.status >= 500) throw new Error(`HTTP ${answer.status}: ${answer.body.slice(0, 300)}`);
    if (answer.contentType.includes('json') && /"code":-32603,"message":"Internal error/.test(answer.body)) {
      throw new Error(`JSON-RPC internal error: ${answer.body.slice(0, 300)}`);
    }
    // An error answer stays small whatever the client sent (problems are capped, client text is cut).
    if (answer.body.includes('"error"')) expect(answer.body.length).toBeLessThan(16_384);
  }

  it(`answers ${numRuns} wide and deep bodies below 500, without a stall (seed ${seed})`, async () => {
    const places: Place[] = [
      'legacyArguments',
      'legacyTaskArguments',
      'modernArguments',
      'modernTaskArguments',
      'modernMeta',
      'mrtrInputResponses',
      'tasksUpdate',
      'initializeCapabilities',
      'promptArguments',
      'completionArguments',
      'strayResponse',
      'strayErrorData',
    ];
    const caseArb = fc.record({
      place: fc.constantFrom(...places),
      tool: fc.constantFrom(...TOOLS),
      task: fc.nat(),
      text: shapeArb.map(render),
    });
    // Code paths run once before measuring: the first call of each compiles it, a stall no later one has.
    for (const c of fc.sample(caseArb, { numRuns: 12, seed: seed + 2 })) {
      await send(...request(c.place, c.text, c.tool, c.task));
    }
    const statuses = new Map<number, number>();
    let timeouts = 0;
    await fc.assert(
      fc.asyncProperty(caseArb, async ({ place, tool, task, text }) => {
        const [body, headers] = request(place, text, tool, task);
        const answer = await measured(`${place} ${tool} ${text.slice(0, 30)} (${text.length} bytes)`, () =>
          send(body, headers),
        );
        if (answer === 'timeout') {
          timeouts++;
          return;
        }
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        judge(answer);
      }),
      { seed, numRuns, endOnFailure: true },
    );
    const replayed = await confirmStalls();
    process.stdout.write(
      `fuzz wide/deep: seed ${seed}, ${numRuns} bodies, statuses ${JSON.stringify(Object.fromEntries(statuses))}, ` +
        `${timeouts} timeouts, longest event-loop stall ${worst.ms.toFixed(1)} ms (${worst.what}; ` +
        `${replayed} replayed)\n`,
    );
    expect(timeouts).toBe(0);
    expect(worst.ms).toBeLessThan(MAX_LOOP_DELAY_MS);
    expect((await fetch(`http://127.0.0.1:${port}/health/live`)).status).toBe(200);
  }, 300_000);

  it('ends every elicitation the client answers with a wide or deep result or error.data', async () => {
    const answers = fc.record({ asError: fc.boolean(), text: shapeArb.map(render) });
    const runs = Math.max(10, Math.round(numRuns / 5));
    Object.assign(worst, { ms: 0, what: '' });
    await fc.assert(
      fc.asyncProperty(answers, async ({ asError, text }) => {
        const what = `${asError ? 'error.data' : 'result'} ${text.slice(0, 30)} (${text.length} bytes)`;
        await measured(what, () => answerElicitation(asError, text));
      }),
      { seed: seed + 1, numRuns: runs, endOnFailure: true },
    );
    const replayed = await confirmStalls();
    process.stdout.write(
      `fuzz elicitation answers: ${runs}, longest event-loop stall ${worst.ms.toFixed(1)} ms (${worst.what}; ` +
        `${replayed} replayed)\n`,
    );
    expect(worst.ms).toBeLessThan(MAX_LOOP_DELAY_MS);
  }, 300_000);
});
