import type { INestApplication } from '@nestjs/common';
import fc from 'fast-check';
import { LifecycleService } from '../../src/lifecycle/lifecycle.service.js';
import { KNOWN_ERROR_CODES } from '../../src/protocol/json-rpc.js';
import { LEGACY, MODERN, modernCall, openSession, rpc, sessionHeaders } from '../support/mcp-http.js';
import { answerElicitationWithError, newSeries, scrapeSeries } from '../support/metric-series.js';
import { MCP_POST, rawRequest, type RawAnswer } from '../support/raw-http.js';
import { PROXY_SECRET } from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/**
 * The fuzz tier, at the edges a hostile client reaches before any handler (issue 19):
 *
 * - path spellings (case, trailing and doubled slashes, percent-encoded letters, dot segments, queries):
 *   whatever the router hands to the MCP endpoint meets the same per-address rate limit, drain refusal and
 *   origin policy as `/mcp` itself;
 * - client-chosen values (error codes in answers to the server's requests, method, tool and prompt names,
 *   protocol versions, HTTP methods, paths, task ids): none of them adds a series to /metrics.
 *
 * FUZZ_SEED fixes the seed as in http-edge.fuzz-spec.ts; FUZZ_RUNS / 20 is the number of runs of each
 * property (500 by default). A failure prints fast-check's report, which replays with FUZZ_SEED=<seed>.
 */

const DEFAULT_SEED = 20261201;
const seed =
  process.env.FUZZ_SEED === 'random'
    ? Math.floor(Math.random() * 2 ** 31)
    : Number(process.env.FUZZ_SEED ?? DEFAULT_SEED);
const numRuns = Math.max(10, Math.ceil(Number(process.env.FUZZ_RUNS ?? 10_000) / 20));

const PROXY = { AUTH_PROVIDERS: 'proxy', AUTH_PROXY_SECRET: PROXY_SECRET, MCP_CONFORMANCE_FIXTURES: 'true' };
const PING = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
/** A token refills in 1 s at RATE_LIMIT_ADDRESS_RPS=1: a second request sooner than this must meet none. */
const REFILL_MARGIN_MS = 800;

const originOf = async (app: INestApplication) => await loopbackUrl(app);

/** A source address no earlier run used, so its per-address bucket starts full (one token). */
let addressSeq = 0;
function freshAddress(): string {
  addressSeq++;
  return `127.${1 + Math.floor(addressSeq / 62500)}.${1 + (Math.floor(addressSeq / 250) % 250)}.${1 + (addressSeq % 250)}`;
}

/** The router's own 404 (Nest's "Cannot POST /x"): the request reached no route at all. */
function unrouted(a: RawAnswer): boolean {
  if (a.status !== 404) return false;
  try {
    return /^Cannot [A-Z]+ /.test((JSON.parse(a.text) as { message?: string }).message ?? '');
  } catch {
    return false;
  }
}

// ---- generators: spellings of /mcp ----

const hex = (ch: string) => ch.charCodeAt(0).toString(16);
const spelled = (ch: string) =>
  fc.oneof(
    { weight: 12, arbitrary: fc.constantFrom(ch, ch.toUpperCase()) },
    { weight: 1, arbitrary: fc.constantFrom(`%${hex(ch)}`, `%${hex(ch).toUpperCase()}`) },
  );
/** Mostly spellings the router serves, with every kind of near miss mixed in. */
const pathArb = fc
  .record({
    lead: fc.oneof(
      { weight: 8, arbitrary: fc.constant('/') },
      { weight: 1, arbitrary: fc.constantFrom('//', '/./', '/x/../', '/%2F') },
    ),
    word: fc.tuple(spelled('m'), spelled('c'), spelled('p')).map((a) => a.join('')),
    tail: fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom('', '/') },
      { weight: 2, arbitrary: fc.constantFrom('//', '/x', '/.', '%2F', '%20', ';x', '.', '~') },
    ),
    query: fc.constantFrom('', '', '', '?', '?a=1', '?x=/mcp', '#f'),
  })
  .map(({ lead, word, tail, query }) => `${lead}${word}${tail}${query}`);
const verbArb = fc.constantFrom('POST', 'POST', 'GET', 'DELETE');
const originArb = fc.constantFrom<Record<string, string>>(
  {},
  {},
  { origin: 'https://evil.example' },
  { host: 'evil.example' },
);

// ---- generators: client-chosen values ----

/** A code outside the closed set of known ones (those may legitimately add one series each, once). */
const codeArb = fc
  .oneof(
    fc.integer(),
    fc.integer({ min: -33000, max: -32000 }),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.constantFrom(2 ** 53, -(2 ** 60), 7000000.5, 0, -0),
  )
  .filter((c) => !KNOWN_ERROR_CODES.has(c));
const nameArb = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.stringMatching(/^[a-z_/]{1,30}$/),
  fc.constantFrom('constructor', '__proto__', 'other', 'tools/call ', 'TOOLS/CALL'),
);
/** Methods Node's parser accepts that this server does not route (the routed ones are a closed set). */
const HTTP_EXTRA = [
  'PROPFIND',
  'MKCOL',
  'LOCK',
  'UNLOCK',
  'SEARCH',
  'REPORT',
  'PURGE',
  'LINK',
  'COPY',
  'MOVE',
];

const NAME_KINDS = [
  'legacy_method',
  'modern_method',
  'notification',
  'legacy_tool',
  'modern_tool',
  'prompt',
  'task_id',
  'resource',
] as const;

type Input =
  | { kind: 'elicitation_error'; code: number }
  | { kind: 'legacy_method' | 'modern_method' | 'notification'; name: string }
  | { kind: 'legacy_tool' | 'modern_tool' | 'prompt' | 'task_id' | 'resource'; name: string }
  | { kind: 'legacy_version' | 'modern_version'; name: string }
  | { kind: 'http_method'; method: string; path: string }
  | { kind: 'path'; path: string };

const inputArb: fc.Arbitrary<Input> = fc.oneof(
  { weight: 3, arbitrary: codeArb.map((code) => ({ kind: 'elicitation_error' as const, code })) },
  fc.record({
    kind: fc.constantFrom(
      'legacy_method',
      'modern_method',
      'notification',
      'legacy_tool',
      'modern_tool',
      'prompt',
      'task_id',
      'resource',
      'legacy_version',
      'modern_version',
    ),
    name: nameArb,
  }),
  fc.record({
    kind: fc.constant('http_method' as const),
    method: fc.constantFrom(...HTTP_EXTRA),
    path: fc.constantFrom('/mcp', '/MCP', '/metrics', '/health/live', '/nowhere'),
  }),
  fc.record({
    kind: fc.constant('path' as const),
    path: fc.oneof(
      fc.stringMatching(/^[A-Za-z0-9._~%-]{0,40}$/).map((p) => `/zz/${p}`),
      pathArb.map((p) => `/zz${p}`),
      fc.constantFrom('/METRICS', '/Health/Live', '/.well-known/OAUTH-protected-resource'),
    ),
  }),
);

describe('fuzz: path spellings and client-chosen label values (real AppModule, real PostgreSQL)', () => {
  let db: TestDatabase;
  const apps: INestApplication[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('fuzz_edges');
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await db?.drop();
  });

  async function start(env: Record<string, string>): Promise<INestApplication> {
    const app = await createTestApp(db.url, env, [], { logger: ['error'] });
    apps.push(app);
    return app;
  }

  it(
    `applies the rate limit, the drain refusal and the origin policy to every spelling the router serves as /mcp (seed ${seed})`,
    async () => {
      const open = await originOf(await start({ ...PROXY, RATE_LIMIT_ADDRESS_RPS: '0' }));
      const limited = await originOf(
        await start({ ...PROXY, RATE_LIMIT_ADDRESS_RPS: '1', RATE_LIMIT_ADDRESS_BURST: '1' }),
      );
      const drainingApp = await start({ ...PROXY, RATE_LIMIT_ADDRESS_RPS: '0' });
      const draining = await originOf(drainingApp);
      drainingApp.get(LifecycleService).beginDrain();

      let routed = 0;
      const spellings = new Set<string>();
      await fc.assert(
        fc.asyncProperty(pathArb, verbArb, originArb, async (path, verb, extra) => {
          const headers = { ...MCP_POST, ...extra };
          const body = verb === 'POST' ? PING : undefined;
          const send = (origin: string, p: string, localAddress?: string) =>
            rawRequest(origin, p, verb, headers, body, { localAddress });

          const answer = await send(open, path);
          expect(answer.status).toBeLessThan(500);
          if (unrouted(answer)) {
            // No route: the middleware may refuse it too (a prefix match errs on the side of refusing).
            expect([404, 429]).toContain((await send(limited, path, freshAddress())).status);
            expect([404, 503]).toContain((await send(draining, path)).status);
            return;
          }
          routed++;
          spellings.add(path);
          // The endpoint answers as for /mcp: origin policy first (403, no challenge), else the challenge.
          const canonical = await send(open, '/mcp');
          expect({ path, status: answer.status }).toEqual({ path, status: canonical.status });
          expect(answer.headers['www-authenticate'] === undefined).toBe(
            canonical.headers['www-authenticate'] === undefined,
          );
          // The address's one token goes to /mcp; the spelling, right after, must find the bucket empty.
          for (let attempt = 0; ; attempt++) {
            const address = freshAddress();
            const first = await send(limited, '/mcp', address);
            expect(first.status).not.toBe(429);
            const t0 = Date.now();
            const second = await send(limited, path, address);
            if (second.status === 429) break;
            // Only a refill (a stalled machine) may let it through; then try again with a new address.
            expect({ path, status: second.status, afterRefill: Date.now() - t0 > REFILL_MARGIN_MS }).toEqual({
              path,
              status: second.status,
              afterRefill: true,
            });
            expect(attempt).toBeLessThan(3);
          }
          const drained = await send(draining, path);
          expect({ path, status: drained.status }).toEqual({ path, status: 503 });
        }),
        { seed, numRuns, endOnFailure: true },
      );
      process.stdout.write(
        `edges fuzz: ${numRuns} spellings, ${routed} routed to /mcp (${spellings.size} distinct), seed ${seed}\n`,
      );
      expect(routed).toBeGreaterThan(numRuns / 10);
    },
    10 * 60_000,
  );

  it(
    `adds no metric series for any client-chosen value (seed ${seed})`,
    async () => {
      const app = await start({
        MCP_CONFORMANCE_FIXTURES: 'true',
        RATE_LIMIT_ADDRESS_RPS: '0',
        RATE_LIMIT_PRINCIPAL_RPS: '0',
      });
      const origin = await originOf(app);
      const url = `${origin}/mcp`;
      const session = await openSession(url, { elicitation: {} });
      const headers = sessionHeaders(session);
      let nextId = 1000;

      async function apply(input: Input): Promise<void> {
        const id = nextId++;
        switch (input.kind) {
          case 'elicitation_error': {
            const { answerStatus, call } = await answerElicitationWithError(url, headers, input.code, id);
            // Only integer codes are JSON-RPC codes: anything else is refused, never relayed.
            if (Number.isSafeInteger(input.code)) {
              expect(answerStatus).toBe(202);
              expect(call.error.code).toBe(input.code + 0); // -0 travels as 0
            } else {
              expect(answerStatus).toBe(400);
            }
            return;
          }
          case 'legacy_method':
            await rpc(url, { jsonrpc: '2.0', id, method: input.name }, headers);
            return;
          case 'notification':
            await rpc(url, { jsonrpc: '2.0', method: `notifications/${input.name}` }, headers);
            return;
          case 'modern_method':
            await modernCall(url, id, input.name);
            return;
          case 'legacy_tool':
            await rpc(
              url,
              { jsonrpc: '2.0', id, method: 'tools/call', params: { name: input.name } },
              headers,
            );
            return;
          case 'modern_tool':
            await modernCall(url, id, 'tools/call', { name: input.name }, { name: input.name });
            return;
          case 'prompt':
            await rpc(
              url,
              { jsonrpc: '2.0', id, method: 'prompts/get', params: { name: input.name } },
              headers,
            );
            return;
          case 'task_id':
            await rpc(
              url,
              { jsonrpc: '2.0', id, method: 'tasks/get', params: { taskId: input.name } },
              headers,
            );
            return;
          case 'resource':
            await rpc(
              url,
              { jsonrpc: '2.0', id, method: 'resources/read', params: { uri: input.name } },
              headers,
            );
            return;
          case 'legacy_version':
            await rpc(
              url,
              { jsonrpc: '2.0', id, method: 'ping' },
              { ...headers, 'mcp-protocol-version': input.name },
            );
            return;
          case 'modern_version': {
            // The header repeats the body's version when HTTP carries it as is; else it says 2026-07-28
            // (the answer is then a header mismatch: another closed-set outcome, which the warm-up covers).
            const carried = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(input.name);
            await modernCall(
              url,
              id,
              'ping',
              {},
              {
                meta: { 'io.modelcontextprotocol/protocolVersion': input.name },
                headers: { 'mcp-protocol-version': carried ? input.name : MODERN },
              },
            );
            return;
          }
          case 'http_method':
            await rawRequest(origin, input.path, input.method, MCP_POST);
            return;
          case 'path':
            await rawRequest(origin, input.path, 'GET', {});
            return;
        }
      }

      // Warm-up: every kind of input once, with values that are not in any closed set, so each series a
      // kind can ever make (its `other`, its status class) exists before the property starts.
      const warmUp: Input[] = [
        { kind: 'elicitation_error', code: 1 },
        { kind: 'elicitation_error', code: 0.5 },
        // Each name in three shapes: plain, one HTTP cannot carry as is in a header, and empty.
        ...NAME_KINDS.flatMap((kind) => ['x/y', ' x/y ', ''].map((name) => ({ kind, name }))),
        ...(['legacy_version', 'modern_version'] as const).flatMap((kind) =>
          ['1999-01-01', ' 1999-01-01 ', '', kind === 'legacy_version' ? LEGACY : MODERN].map((name) => ({
            kind,
            name,
          })),
        ),
        ...['/mcp', '/MCP', '/metrics', '/health/live', '/nowhere'].map((path) => ({
          kind: 'http_method' as const,
          method: 'PROPFIND',
          path,
        })),
        { kind: 'path', path: '/zz/a' },
        { kind: 'path', path: '/METRICS' },
        { kind: 'path', path: '/Health/Live' },
        { kind: 'path', path: '/.well-known/OAUTH-protected-resource' },
      ];
      for (const input of warmUp) await apply(input);
      // Every sample once too (a value may land on another status class the first time), then the baseline.
      for (const input of fc.sample(inputArb, { numRuns: 50, seed: seed + 1 })) await apply(input);
      await scrapeSeries(origin);
      const baseline = await scrapeSeries(origin);

      await fc.assert(
        fc.asyncProperty(inputArb, async (input) => {
          await apply(input);
          expect({ input, added: newSeries(baseline, await scrapeSeries(origin)) }).toEqual({
            input,
            added: [],
          });
        }),
        { seed, numRuns, endOnFailure: true },
      );
      process.stdout.write(
        `edges fuzz: ${numRuns} client-chosen values, ${baseline.size} series throughout\n`,
      );
    },
    10 * 60_000,
  );
});
