// What tracing costs: inline tools/call throughput with tracing off (the default) and on (OTLP export).
//
//   npm run build && TEST_DATABASE_URL=postgres://user@host:5432/postgres node bench/tracing-overhead.mjs [seconds] [concurrency] [rounds]
//
// Starts the built server twice on one scratch database: once with no OTEL_* variables, once with
// OTEL_TRACES_EXPORTER=otlp exporting (OTLP/HTTP, batched) to a sink on loopback that accepts and drops
// everything. Then, alternating between them in rounds so machine noise hits both alike, it drives
// `concurrency` clients doing back-to-back tools/call test_simple_text for `seconds` per round, in the
// 2026-07-28 era (stateless, no database access) and in the legacy era (a session lookup per call).
// Prints the median req/s over the rounds per mode and era. BENCH_BASELINE_MAIN=<path to another build's
// dist/src/main.js> adds that build as a mode (e.g. the commit before tracing existed); BENCH_SAMPLED=1 adds
// tracing on with a 10% parent-based ratio sampler.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { admin, spawnServer } from './bench-support.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SECONDS = Number(process.argv[2] ?? 5);
const CONCURRENCY = Number(process.argv[3] ?? 8);
const ROUNDS = Number(process.argv[4] ?? 3);
const LEGACY = '2025-11-25';
const MODERN = '2026-07-28';

const serverUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
if (!serverUrl) {
  console.error('Set TEST_DATABASE_URL (a PostgreSQL server on which a scratch database is created).');
  process.exit(2);
}

function start(main, databaseUrl, extraEnv) {
  return spawnServer(
    [main],
    { PORT: '0', DATABASE_URL: databaseUrl, MCP_CONFORMANCE_FIXTURES: 'true', ...extraEnv },
    { cwd: ROOT, timeoutMs: 30000 },
  );
}

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

async function post(url, body, headers = {}) {
  const res = await fetch(url, { method: 'POST', headers: { ...JSON_HEADERS, ...headers }, body });
  const text = await res.text();
  if (res.status !== 200 && res.status !== 202) throw new Error(`${res.status} ${text}`);
  return res;
}

async function openSession(url) {
  const res = await post(
    url,
    JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'bench', version: '1' } },
    }),
  );
  const headers = { 'mcp-session-id': res.headers.get('mcp-session-id'), 'mcp-protocol-version': LEGACY };
  await post(url, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }), headers);
  return headers;
}

const modernBody = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: {
    name: 'test_simple_text',
    _meta: {
      'io.modelcontextprotocol/protocolVersion': MODERN,
      'io.modelcontextprotocol/clientCapabilities': {},
    },
  },
});
const modernHeaders = {
  'mcp-protocol-version': MODERN,
  'mcp-method': 'tools/call',
  'mcp-name': 'test_simple_text',
};
const legacyBody = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'test_simple_text' },
});

/** `concurrency` clients calling back to back for `seconds`; returns requests per second. */
async function drive(url, body, headers) {
  const until = performance.now() + SECONDS * 1000;
  let done = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < until) {
        await post(url, body, headers);
        done++;
      }
    }),
  );
  return done / ((performance.now() - t0) / 1000);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const sink = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
});
await new Promise((r) => sink.listen(0, '127.0.0.1', r));
const sinkUrl = `http://127.0.0.1:${sink.address().port}`;

const name = `bench_${randomBytes(4).toString('hex')}`;
await admin(serverUrl, `CREATE DATABASE "${name}"`);
const dbUrl = new URL(serverUrl);
dbUrl.pathname = `/${name}`;
const MAIN = join(ROOT, 'dist', 'src', 'main.js');
const modes = [
  { label: 'tracing off (default)', main: MAIN, env: {} },
  {
    label: 'tracing on (OTLP)',
    main: MAIN,
    env: { OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl },
  },
];
if (process.env.BENCH_SAMPLED) {
  modes.push({
    label: 'tracing on, 10% sampled',
    main: MAIN,
    env: {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.1',
    },
  });
}
if (process.env.BENCH_BASELINE_MAIN) {
  modes.unshift({ label: 'baseline build', main: process.env.BENCH_BASELINE_MAIN, env: {} });
}
const servers = [];
try {
  for (const m of modes) {
    const s = await start(m.main, dbUrl.toString(), m.env);
    servers.push(s);
    m.url = s.url;
    m.session = await openSession(s.url);
    m.modern = [];
    m.legacy = [];
    // Warm-up: JIT, pool connections, first spans exported.
    await drive(m.url, modernBody, modernHeaders);
    await drive(m.url, legacyBody, m.session);
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const m of modes) {
      m.modern.push(await drive(m.url, modernBody, modernHeaders));
      m.legacy.push(await drive(m.url, legacyBody, m.session));
    }
  }
  console.log(
    `inline tools/call test_simple_text, ${CONCURRENCY} clients, ${ROUNDS} rounds of ${SECONDS} s (median req/s)`,
  );
  for (const m of modes) {
    const rounds = (xs) => xs.map((x) => x.toFixed(0)).join('/');
    console.log(
      `${m.label.padEnd(24)} 2026-07-28: ${median(m.modern).toFixed(0).padStart(6)} req/s (${rounds(m.modern)})` +
        `   2025-11-25 session: ${median(m.legacy).toFixed(0).padStart(6)} req/s (${rounds(m.legacy)})`,
    );
  }
} finally {
  for (const s of servers) s.proc.kill('SIGTERM');
  await Promise.all(
    servers.map((s) => new Promise((r) => (s.proc.exitCode !== null ? r() : s.proc.once('exit', r)))),
  );
  await admin(serverUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  sink.close();
}
