// How much one instance holds for many open SSE streams (issue 11: 10,000 streams under 1 GB RSS).
//
//   npm run build && TEST_DATABASE_URL=postgres://user@127.0.0.1:5432/postgres node bench/sse-streams.mjs [N] [KIND]
//
// Opens N streams (default 10,000) against one built server and keeps them open, then reads the server's RSS
// and heap from /metrics (after a forced full GC), closes them all and reads again. KIND is `listen` (2026-07-28 subscriptions/listen,
// no session; the default) or `get` (2025-11-25: initialize a session, then its GET stream). Each stream is
// counted open once its first event (the acknowledgement or the priming event) has arrived. The per-principal
// stream and session quotas and the rate limits are raised for the run: one principal opens everything.
// Loopback only; bounded by N.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { admin, spawnServer } from './bench-support.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const N = Math.max(1, Math.min(15000, Number(process.argv[2] ?? 10000)));
const KIND = process.argv[3] ?? 'listen';
const PARALLEL = 64;
if (!['listen', 'get'].includes(KIND)) {
  console.error('KIND must be listen or get');
  process.exit(2);
}
const serverUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
if (!serverUrl) {
  console.error('Set TEST_DATABASE_URL (a PostgreSQL server on which a scratch database is created).');
  process.exit(2);
}

const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });

/** Sends a request and resolves with the response once `ready` says enough of the body has arrived. */
function request(port, { method, headers, body }, ready) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/mcp', method, headers, agent }, (res) => {
      let text = '';
      const onData = (chunk) => {
        text += chunk.toString();
        if (ready(text)) {
          res.off('data', onData);
          resolve({ req, res, text });
        }
      };
      res.on('data', onData);
      res.on('end', () =>
        ready(text)
          ? resolve({ req, res, text })
          : reject(new Error(`ended early: ${res.statusCode} ${text}`)),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

function listen(port) {
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'subscriptions/listen',
    params: {
      notifications: { toolsListChanged: true },
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': {},
      },
    },
  });
  return request(
    port,
    {
      method: 'POST',
      headers: {
        ...JSON_HEADERS,
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'subscriptions/listen',
      },
      body,
    },
    (text) => text.includes('notifications/subscriptions/acknowledged'),
  );
}

async function get(port) {
  const init = await request(
    port,
    {
      method: 'POST',
      headers: JSON_HEADERS,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: {
          protocolVersion: '2025-11-25',
          capabilities: {},
          clientInfo: { name: 'bench', version: '1' },
        },
      }),
    },
    (text) => text.includes('"result"'),
  );
  const sid = init.res.headers['mcp-session-id'];
  init.res.resume();
  const headers = { ...JSON_HEADERS, 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
  await request(
    port,
    {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    },
    () => true,
  ).then(({ res }) => res.resume());
  // The priming event carries an id and an empty data line.
  return request(port, { method: 'GET', headers: { accept: 'text/event-stream', ...headers } }, (t) =>
    t.includes('id:'),
  );
}

/** Memory after a full collection (bench/gc-on-signal.mjs), so the heap is live memory, not collector timing. */
async function memory(port) {
  server.proc.kill('SIGUSR2');
  await new Promise((r) => setTimeout(r, 1000));
  const text = await new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: '/metrics', agent }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve(body));
      })
      .on('error', reject);
  });
  const value = (name) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  const mb = (v) => `${(v / 2 ** 20).toFixed(1)} MB`;
  return {
    rss: value('process_resident_memory_bytes'),
    heap: value('nodejs_heap_size_used_bytes'),
    format() {
      return `rss ${mb(this.rss)}, heap ${mb(this.heap)}`;
    },
  };
}

const name = `bench_sse_${randomBytes(4).toString('hex')}`;
await admin(serverUrl, `CREATE DATABASE "${name}"`);
const dbUrl = new URL(serverUrl);
dbUrl.pathname = `/${name}`;
const server = await spawnServer(
  [
    '--expose-gc',
    '--import',
    pathToFileURL(join(ROOT, 'bench', 'gc-on-signal.mjs')).href,
    join(ROOT, 'dist', 'src', 'main.js'),
  ],
  {
    HOST: '127.0.0.1',
    PORT: '0',
    DATABASE_URL: dbUrl.toString(),
    LOG_LEVEL: 'log',
    DB_POOL_MAX: '20',
    QUOTA_STREAMS_PER_PRINCIPAL: String(N + 100),
    QUOTA_SESSIONS_PER_PRINCIPAL: String(N + 100),
    QUOTA_IN_FLIGHT_PER_PRINCIPAL: String(N + 100),
    RATE_LIMIT_PRINCIPAL_RPS: '0',
    RATE_LIMIT_ADDRESS_RPS: '0',
  },
  { cwd: ROOT },
);
const open = [];
try {
  const before = await memory(server.port);
  console.log(`sse-streams: N=${N} ${KIND} streams, server on ${server.url}`);
  console.log(`before: ${before.format()}`);
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      while (next < N) {
        next++;
        open.push(await (KIND === 'listen' ? listen(server.port) : get(server.port)));
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const during = await memory(server.port);
  console.log(`${open.length} streams open after ${seconds.toFixed(1)} s: ${during.format()}`);
  console.log(`per stream: ${((during.rss - before.rss) / open.length / 1024).toFixed(1)} KB of RSS`);
  for (const { req } of open.splice(0)) req.destroy();
  await new Promise((r) => setTimeout(r, 3000));
  console.log(`after closing them all: ${(await memory(server.port)).format()}`);
} finally {
  for (const { req } of open) req.destroy();
  server.proc.kill('SIGTERM');
  await server.exited;
  agent.destroy();
  await admin(serverUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
}
