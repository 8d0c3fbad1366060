// Soak benchmark (issue 10): floods one built server with junk from one principal and reports the server's
// heap and RSS before and after each kind, plus the latency a well-behaved second principal sees during the
// flood against the same loop without it. Loopback only; every loop is bounded by N.
//
//   npm run build && TEST_DATABASE_URL=postgres://user@127.0.0.1:5432/postgres node bench/soak.mjs [N] [C]
//
// N requests of each kind (default 100000), C concurrent flooding clients (default 32). Kinds:
//   unknown-task-ids   tasks/update (2026-07-28) naming unknown 6 KB task ids
//   dropped-listens    subscriptions/listen with 100 KB bodies, dropped as soon as the stream opens
//   dropped-gets       legacy GET streams dropped as soon as they open
//   init-delete        initialize then DELETE
//   abandoned-results  tasks/result on a long task, abandoned by the client after 20 ms
// Rate limits are turned off (RATE_LIMIT_*_RPS=0) so the junk reaches the code whose memory is measured
// (SOAK_PRINCIPAL_RPS=n turns the per-principal one on); other quotas keep their defaults. Heap is read from /metrics (nodejs_heap_size_used_bytes, after a forced
// GC through bench/gc-on-signal.mjs) and RSS from process_resident_memory_bytes.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { admin, spawnServer, summary } from './bench-support.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const N = Math.max(1, Math.min(1_000_000, Number(process.argv[2] ?? 100000)));
const C = Math.max(1, Math.min(256, Number(process.argv[3] ?? 32)));
const GOOD_BASELINE = 1000;
// SOAK_PRINCIPAL_RPS=<n> turns the per-principal rate limit on (the flood then meets 429s; the good principal
// stays far below it). The per-address limit stays off: both principals share the loopback address.
const PRINCIPAL_RPS = String(Math.max(0, Number(process.env.SOAK_PRINCIPAL_RPS ?? 0)));
const GOOD_PACE_MS = Number(PRINCIPAL_RPS) > 0 ? 4000 / Number(PRINCIPAL_RPS) : 0;
const LEGACY = '2025-11-25';
const MODERN = '2026-07-28';
const SECRET = 'soak-bench-proxy-secret-0123456789';
const EXT_CAPS = { extensions: { 'io.modelcontextprotocol/tasks': {} } };

const serverUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
if (!serverUrl) {
  console.error('Set TEST_DATABASE_URL (a PostgreSQL server on which a scratch database is created).');
  process.exit(2);
}

function start(databaseUrl) {
  return spawnServer(
    [
      '--expose-gc',
      '--import',
      pathToFileURL(join(ROOT, 'bench', 'gc-on-signal.mjs')).href,
      join(ROOT, 'dist', 'src', 'main.js'),
    ],
    {
      HOST: '127.0.0.1',
      PORT: '0',
      DATABASE_URL: databaseUrl,
      LOG_LEVEL: 'log',
      MCP_CONFORMANCE_FIXTURES: 'true',
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: SECRET,
      RATE_LIMIT_PRINCIPAL_RPS: PRINCIPAL_RPS,
      RATE_LIMIT_ADDRESS_RPS: '0',
      SSE_RETRY_MS: '0',
    },
    { cwd: ROOT },
  );
}

const user = (name) => ({ 'x-forwarded-user': name, 'x-auth-proxy-secret': SECRET });
const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

function modernBody(method, params, caps = EXT_CAPS, extraMeta = {}) {
  return {
    jsonrpc: '2.0',
    id: randomBytes(4).readUInt32BE(),
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': MODERN,
        'io.modelcontextprotocol/clientCapabilities': caps,
        ...extraMeta,
      },
    },
  };
}

function modernHeaders(method, name) {
  return { 'mcp-protocol-version': MODERN, 'mcp-method': method, ...(name ? { 'mcp-name': name } : {}) };
}

async function post(url, body, headers, signal) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { ...JSON_HEADERS, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal,
  });
  await res.arrayBuffer();
  return res;
}

async function openSession(url, who) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { ...JSON_HEADERS, ...user(who) },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'soak', version: '1' } },
    }),
  });
  await res.arrayBuffer();
  const id = res.headers.get('mcp-session-id');
  if (!id) throw new Error(`initialize failed: ${res.status}`);
  return id;
}

/** Heap after a forced GC and RSS of the server, from its /metrics. */
async function memory(server) {
  server.proc.kill('SIGUSR2');
  await new Promise((r) => setTimeout(r, 1000));
  const text = await (await fetch(`${server.base}/metrics`)).text();
  const read = (name) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  return { heap: read('nodejs_heap_size_used_bytes'), rss: read('process_resident_memory_bytes') };
}

/**
 * Waits until the server has finished what the flood left queued (requests whose clients were gone before
 * they were read): until its count of handled requests stops moving for a second. At most 120 s.
 */
async function settle(server) {
  const handled = async () => {
    const text = await (await fetch(`${server.base}/metrics`)).text();
    let n = 0;
    for (const m of text.matchAll(/^http_request_duration_seconds_count\{[^}]*\} (\S+)$/gm))
      n += Number(m[1]);
    return n;
  };
  let last = await handled();
  for (let i = 0; i < 120; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = await handled();
    if (now === last + 1) return; // only our own /metrics call moved it
    last = now;
  }
}

const mb = (b) => `${(b / 1024 / 1024).toFixed(1)} MB`;

// The good principal has its own connection pool (node:http), apart from fetch's, which the flood uses: its
// latency is the server's, not that of a client pool churned by thousands of dropped connections.
const goodAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function goodPost(url, body, headers) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request(
      url,
      {
        method: 'POST',
        agent: goodAgent,
        headers: { ...JSON_HEADERS, ...headers, 'content-length': Buffer.byteLength(data) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

/**
 * The well-behaved principal: sequential tools/call in the 2026-07-28 era, timed. Stops when `until()` says.
 * A connection reset (the client reusing a pooled keep-alive connection just as the server times it out)
 * is retried and counted; a dead server ends the run with its output.
 */
async function goodLoop(server, until, max) {
  const ms = [];
  ms.resets = 0;
  const headers = { ...user('good-citizen'), ...modernHeaders('tools/call', 'test_simple_text') };
  for (let i = 0; i < max && !until(); i++) {
    const t0 = performance.now();
    let res;
    try {
      res = await goodPost(
        server.url,
        modernBody('tools/call', { name: 'test_simple_text', arguments: {} }, {}),
        headers,
      );
    } catch (err) {
      if (server.proc.exitCode !== null || server.proc.signalCode !== null) {
        throw new Error(`the server died: ${err?.message}\n${server.output()}`);
      }
      ms.resets++;
      continue;
    }
    if (res.status !== 200) throw new Error(`good principal got ${res.status}`);
    const took = performance.now() - t0;
    ms.push(took);
    // Under a rate limit the well-behaved principal stays at a quarter of it.
    if (GOOD_PACE_MS > took) await new Promise((r) => setTimeout(r, GOOD_PACE_MS - took));
  }
  return ms;
}

/** Runs `one(i)` N times over C workers; returns a status histogram. */
async function flood(one) {
  const statuses = {};
  let next = 0;
  const worker = async (w) => {
    for (;;) {
      const i = next++;
      if (i >= N) return;
      let status;
      try {
        status = await one(i, w);
      } catch (err) {
        status =
          err?.name === 'AbortError' || err?.name === 'TimeoutError' ? 'dropped' : `error:${err?.message}`;
      }
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: C }, (_, w) => worker(w)));
  return statuses;
}

async function dropAfterHeaders(url, init) {
  const c = new AbortController();
  const res = await fetch(url, { ...init, signal: c.signal });
  const status = res.status;
  if (status === 200 && res.headers.get('content-type')?.startsWith('text/event-stream')) {
    // Read the first chunk (priming event or acknowledgement), then drop the connection.
    const reader = res.body.getReader();
    await reader.read();
    c.abort();
    return 'opened+dropped';
  }
  await res.arrayBuffer();
  return status;
}

async function kinds(url) {
  const flooder = 'junk-flooder';
  const padding = 'p'.repeat(100 * 1024);
  // One session and one long task per worker, for the kinds that need them.
  const sessions = [];
  for (let w = 0; w < C; w++) sessions.push(await openSession(url, flooder));
  const longTasks = [];
  for (let w = 0; w < C; w++) {
    const res = await fetch(url, {
      method: 'POST',
      headers: {
        ...JSON_HEADERS,
        ...user(flooder),
        'mcp-session-id': sessions[w],
        'mcp-protocol-version': LEGACY,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'slow_compute', arguments: { seconds: 3600 }, task: { ttl: 7200000 } },
      }),
    });
    longTasks.push((await res.json()).result.task.taskId);
  }
  const sessionHeaders = (w) => ({
    ...user(flooder),
    'mcp-session-id': sessions[w],
    'mcp-protocol-version': LEGACY,
  });
  return {
    'unknown-task-ids': async () => {
      const taskId = randomBytes(3 * 1024).toString('hex');
      const res = await post(url, modernBody('tasks/update', { taskId, inputResponses: { k: 1 } }), {
        ...user(flooder),
        ...modernHeaders('tasks/update', taskId),
      });
      return res.status;
    },
    'dropped-listens': () =>
      dropAfterHeaders(url, {
        method: 'POST',
        headers: { ...JSON_HEADERS, ...user(flooder), ...modernHeaders('subscriptions/listen') },
        body: JSON.stringify(
          modernBody('subscriptions/listen', { notifications: { taskIds: [] } }, EXT_CAPS, { padding }),
        ),
      }),
    'dropped-gets': (_i, w) =>
      dropAfterHeaders(url, {
        method: 'GET',
        headers: { accept: 'text/event-stream', ...sessionHeaders(w) },
      }),
    'init-delete': async () => {
      const id = await openSession(url, flooder);
      const res = await fetch(url, {
        method: 'DELETE',
        headers: { ...user(flooder), 'mcp-session-id': id, 'mcp-protocol-version': LEGACY },
      });
      await res.arrayBuffer();
      return `init+${res.status}`;
    },
    'abandoned-results': async (_i, w) => {
      await post(
        url,
        { jsonrpc: '2.0', id: 2, method: 'tasks/result', params: { taskId: longTasks[w] } },
        sessionHeaders(w),
        AbortSignal.timeout(20),
      );
      return 'answered';
    },
  };
}

const dbName = `soak_${randomBytes(4).toString('hex')}`;
const dbUrl = new URL(serverUrl);
dbUrl.pathname = `/${dbName}`;
await admin(serverUrl, `CREATE DATABASE ${dbName}`);
let server;
try {
  server = await start(dbUrl.toString());
  console.log(
    `soak: N=${N} per kind, C=${C} flooding clients, RATE_LIMIT_PRINCIPAL_RPS=${PRINCIPAL_RPS}, server on ${server.url}`,
  );
  await goodLoop(server, () => false, 200); // warm-up
  const baseline = await goodLoop(server, () => false, GOOD_BASELINE);
  console.log(summary('good principal, no flood', baseline));
  const start0 = await memory(server);
  console.log(`server at start: heap ${mb(start0.heap)}, rss ${mb(start0.rss)}`);
  const all = await kinds(server.url);
  // SOAK_KINDS=a,b runs only those kinds.
  const only = process.env.SOAK_KINDS?.split(',').filter(Boolean);
  for (const [kind, one] of Object.entries(all)) {
    if (only && !only.includes(kind)) continue;
    const before = await memory(server);
    const t0 = performance.now();
    let flooding = true;
    const good = goodLoop(server, () => !flooding, 10_000_000);
    const statuses = await flood(one);
    flooding = false;
    const during = await good;
    const seconds = (performance.now() - t0) / 1000;
    await settle(server);
    const after = await memory(server);
    console.log(
      `\n${kind}: ${N} requests in ${seconds.toFixed(1)} s (${(N / seconds).toFixed(0)}/s) ${JSON.stringify(statuses)}`,
    );
    console.log(
      `  heap ${mb(before.heap)} -> ${mb(after.heap)} (${after.heap >= before.heap ? '+' : ''}${mb(after.heap - before.heap)}), ` +
        `rss ${mb(before.rss)} -> ${mb(after.rss)}`,
    );
    console.log(
      `  ${summary('good principal during the flood', during)}, connection resets retried: ${during.resets}`,
    );
    if (server.proc.exitCode !== null) throw new Error(`the server died:\n${server.output()}`);
  }
  const end = await memory(server);
  console.log(`server log lines: ${server.logLines()}`);
  if (process.env.SOAK_DEBUG) console.log(server.output());
  console.log(
    `\nserver at end: heap ${mb(end.heap)} (start ${mb(start0.heap)}), rss ${mb(end.rss)} (start ${mb(start0.rss)})`,
  );
} finally {
  goodAgent.destroy();
  server?.proc.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 1500));
  await admin(serverUrl, `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
}
