// Latency figures for /mcp, measured against two built server processes on one fresh database.
//
//   npm run build && TEST_DATABASE_URL=postgres://user@host:5432/postgres node bench/latency.mjs [N]
//
// Reports the median and p95 of: tools/call test_simple_text in the legacy era (in a session) and in the
// 2026-07-28 era (stateless), N sequential requests each (default 200); and a dropped SSE stream
// (test_reconnection) resumed with GET + Last-Event-ID on the same instance and on the other one.
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { admin, spawnServer } from './bench-support.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const N = Number(process.argv[2] ?? 200);
const LEGACY = '2025-11-25';
const MODERN = '2026-07-28';

const serverUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
if (!serverUrl) {
  console.error('Set TEST_DATABASE_URL (a PostgreSQL server on which a scratch database is created).');
  process.exit(2);
}

function start(databaseUrl) {
  return spawnServer(
    [join(ROOT, 'dist', 'src', 'main.js')],
    { PORT: '0', DATABASE_URL: databaseUrl, MCP_CONFORMANCE_FIXTURES: 'true', SSE_RETRY_MS: '0' },
    { cwd: ROOT, timeoutMs: 30000 },
  );
}

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

async function post(url, body, headers = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { ...JSON_HEADERS, ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 200 && res.status !== 202) throw new Error(`${res.status} ${text}`);
  return { res, text };
}

async function openSession(url) {
  const { res } = await post(url, {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'bench', version: '1' } },
  });
  const id = res.headers.get('mcp-session-id');
  const headers = { 'mcp-session-id': id, 'mcp-protocol-version': LEGACY };
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
  return headers;
}

function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return `median ${q(0.5).toFixed(2)} ms, p95 ${q(0.95).toFixed(2)} ms, n=${s.length}`;
}

async function timed(fn) {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** POST test_reconnection on `a`, read the priming event until the server closes, resume on `b`. */
async function resumeOnce(a, b, session, id) {
  const res = await fetch(a, {
    method: 'POST',
    headers: { ...JSON_HEADERS, ...session },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_reconnection' } }),
  });
  const primed = await res.text(); // the server ends this response itself after the priming event
  const lastEventId = /^id: (\S+)$/m.exec(primed)[1];
  // The tool finishes 100 ms after closing the stream; wait for it so only the replay itself is timed.
  await new Promise((r) => setTimeout(r, 150));
  return timed(async () => {
    const resumed = await fetch(b, {
      headers: { accept: 'text/event-stream', 'last-event-id': lastEventId, ...session },
    });
    const text = await resumed.text();
    if (!text.includes('Reconnection test completed')) throw new Error(`no result on resume: ${text}`);
  });
}

const name = `bench_${randomBytes(4).toString('hex')}`;
await admin(serverUrl, `CREATE DATABASE "${name}"`);
const dbUrl = new URL(serverUrl);
dbUrl.pathname = `/${name}`;
const servers = [];
try {
  servers.push(await start(dbUrl.toString()));
  servers.push(await start(dbUrl.toString()));
  const [A, B] = servers.map((s) => s.url);

  const session = await openSession(A);
  const legacyCall = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'test_simple_text' } };
  for (let i = 0; i < 20; i++) await post(A, legacyCall, session); // warm-up
  const legacy = [];
  for (let i = 0; i < N; i++) legacy.push(await timed(() => post(A, legacyCall, session)));

  const modernCall = {
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
  };
  const modernHeaders = {
    'mcp-protocol-version': MODERN,
    'mcp-method': 'tools/call',
    'mcp-name': 'test_simple_text',
  };
  for (let i = 0; i < 20; i++) await post(A, modernCall, modernHeaders);
  const modern = [];
  for (let i = 0; i < N; i++) modern.push(await timed(() => post(A, modernCall, modernHeaders)));

  const sameInstance = [];
  const crossInstance = [];
  const R = Math.max(10, Math.floor(N / 5));
  for (let i = 0; i < R; i++) {
    sameInstance.push(await resumeOnce(A, A, session, `s${i}`));
    crossInstance.push(await resumeOnce(A, B, session, `c${i}`));
  }

  console.log(`tools/call test_simple_text, legacy era (session):  ${stats(legacy)}`);
  console.log(`tools/call test_simple_text, 2026-07-28 (stateless):    ${stats(modern)}`);
  console.log(`resume dropped stream (GET Last-Event-ID), same instance:  ${stats(sameInstance)}`);
  console.log(`resume dropped stream (GET Last-Event-ID), other instance: ${stats(crossInstance)}`);
} finally {
  for (const s of servers) s.proc.kill('SIGTERM');
  await Promise.all(
    servers.map((s) => new Promise((r) => (s.proc.exitCode !== null ? r() : s.proc.once('exit', r)))),
  );
  await admin(serverUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
}
