// Commit-to-notification latency across two instances (issue 11). Not run in CI.
//
//   npm run build && TEST_DATABASE_URL=postgres://user@127.0.0.1:5432/postgres node bench/notify-latency.mjs [N]
//
// Two instances, A and B, on one scratch database. Tasks are created and run on B; the client listens on A:
//   legacy   a 2025-11-25 session's GET stream held on A; echo_task calls with params.task sent to B (same
//            session); each task's notifications/tasks/status "completed" is timed on arrival at A's stream
//   modern   a 2026-07-28 subscriptions/listen on A for one task created on B (echo_task_required with a delay
//            longer than the inline window); its notifications/tasks "completed" is timed
// Latency = arrival time − the task's lastUpdatedAt, which PostgreSQL stamps with now() in the transaction that
// completes it (its start, so the figure includes the write and the commit: an upper bound of commit-to-
// notification). Client and database share this machine's clock. N tasks per kind (default 400), 8 at a time,
// with a light background load of tasks/get on both instances so the notification path is not idle.
import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchServerDatabase, pct, spawnServer, stopServer } from './bench-support.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const N = Math.max(10, Number(process.argv[2] ?? 400));
const PARALLEL = 8;
const LEGACY = '2025-11-25';
const MODERN = '2026-07-28';
const EXT_CAPS = { extensions: { 'io.modelcontextprotocol/tasks': {} } };

const serverUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
if (!serverUrl) {
  console.error('Set TEST_DATABASE_URL (a PostgreSQL server on which a scratch database is created).');
  process.exit(2);
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
let rpcId = 0;

function request(url, { method = 'POST', headers = {}, body } = {}) {
  const data = body === undefined ? undefined : JSON.stringify(body);
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method,
        agent,
        headers: {
          accept: 'application/json, text/event-stream',
          ...(data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {}),
          ...headers,
        },
      },
      resolve,
    );
    req.on('error', reject);
    req.end(data);
  });
}

async function json(url, body, headers) {
  const res = await request(url, { body, headers });
  const chunks = [];
  for await (const c of res) chunks.push(c);
  const text = Buffer.concat(chunks).toString();
  let msg;
  if ((res.headers['content-type'] ?? '').includes('text/event-stream')) {
    for (const line of text.split('\n')) if (line.startsWith('data:')) msg = JSON.parse(line.slice(5));
  } else msg = text ? JSON.parse(text) : undefined;
  if (res.statusCode >= 300 || msg?.error) throw new Error(`HTTP ${res.statusCode} ${text.slice(0, 300)}`);
  return { headers: res.headers, result: msg?.result };
}

/** Calls onMessage(json, arrivalMs) for every SSE data line of the response until it ends. */
function sse(res, onMessage) {
  let buf = '';
  res.setEncoding('utf8');
  res.on('data', (chunk) => {
    const now = Date.now();
    buf += chunk;
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of block.split('\n')) {
        if (line.startsWith('data:')) {
          try {
            onMessage(JSON.parse(line.slice(5)), now);
          } catch {
            /* priming events carry no JSON */
          }
        }
      }
    }
  });
}

const legacyHeaders = (sid) => ({ 'mcp-protocol-version': LEGACY, 'mcp-session-id': sid });
const modernBody = (method, params) => ({
  jsonrpc: '2.0',
  id: ++rpcId,
  method,
  params: {
    ...params,
    _meta: {
      'io.modelcontextprotocol/protocolVersion': MODERN,
      'io.modelcontextprotocol/clientCapabilities': EXT_CAPS,
      'io.modelcontextprotocol/clientInfo': { name: 'latency', version: '1.0.0' },
    },
  },
});
const modernHeaders = (method, name) => ({
  'mcp-protocol-version': MODERN,
  'mcp-method': method,
  ...(name ? { 'mcp-name': name } : {}),
});

async function pool(n, parallel, fn) {
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

async function legacyRun(a, b) {
  const init = await json(a.url, {
    jsonrpc: '2.0',
    id: ++rpcId,
    method: 'initialize',
    params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'latency', version: '1.0.0' } },
  });
  const sid = init.headers['mcp-session-id'];
  await request(a.url, { body: { jsonrpc: '2.0', method: 'notifications/initialized' }, headers: legacyHeaders(sid) });
  const stream = await request(a.url, { method: 'GET', headers: { ...legacyHeaders(sid), accept: 'text/event-stream' } });
  const latencies = new Map();
  const waiting = new Map();
  sse(stream, (msg, at) => {
    if (msg.method !== 'notifications/tasks/status' || msg.params.status !== 'completed') return;
    const id = msg.params.taskId;
    if (latencies.has(id)) return;
    latencies.set(id, at - Date.parse(msg.params.lastUpdatedAt));
    waiting.get(id)?.();
  });
  await new Promise((r) => setTimeout(r, 300));
  await pool(N, PARALLEL, async (i) => {
    const created = await json(
      b.url,
      {
        jsonrpc: '2.0',
        id: ++rpcId,
        method: 'tools/call',
        params: { name: 'echo_task', arguments: { text: `n${i}`, delayMs: 20 }, task: { ttl: 600000 } },
      },
      legacyHeaders(sid),
    );
    const id = created.result.task.taskId;
    if (!latencies.has(id)) await new Promise((r) => waiting.set(id, r));
    waiting.delete(id);
  });
  stream.destroy();
  return [...latencies.values()];
}

async function modernRun(a, b) {
  const latencies = [];
  await pool(N, PARALLEL, async (i) => {
    const created = await json(
      b.url,
      modernBody('tools/call', { name: 'echo_task_required', arguments: { text: `n${i}`, delayMs: 250 } }),
      modernHeaders('tools/call', 'echo_task_required'),
    );
    const taskId = created.result.taskId;
    if (!taskId) throw new Error(`no task: ${JSON.stringify(created.result)}`);
    const stream = await request(a.url, {
      body: modernBody('subscriptions/listen', { notifications: { taskIds: [taskId] } }),
      headers: modernHeaders('subscriptions/listen'),
    });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no completion for ${taskId}`)), 20000);
      sse(stream, (msg, at) => {
        if (msg.method === 'notifications/tasks' && msg.params.status === 'completed') {
          latencies.push(at - Date.parse(msg.params.lastUpdatedAt));
          clearTimeout(timer);
          resolve();
        }
      });
    });
    stream.destroy();
  });
  return latencies;
}

/** tasks/get of a finished task on both instances, a few requests at a time, until stopped. */
function backgroundLoad(a, b) {
  let stop = false;
  const run = async () => {
    const created = await json(
      b.url,
      modernBody('tools/call', { name: 'echo_task_required', arguments: { text: 'bg' } }),
      modernHeaders('tools/call', 'echo_task_required'),
    );
    const taskId = created.result.taskId;
    if (!taskId) return; // answered inline: nothing to poll
    await Promise.all(
      [a, b, a, b].map(async (s) => {
        while (!stop) {
          await json(s.url, modernBody('tasks/get', { taskId }), modernHeaders('tasks/get')).catch(() => undefined);
        }
      }),
    );
  };
  const done = run();
  return async () => {
    stop = true;
    await done;
  };
}


async function main() {
  const scratch = await benchServerDatabase(serverUrl, 'bench_notify');
  const env = scratch.env;
  const a = await spawnServer([join(ROOT, 'dist', 'src', 'main.js')], env, { label: 'A', cwd: ROOT });
  const b = await spawnServer([join(ROOT, 'dist', 'src', 'main.js')], env, { label: 'B', cwd: ROOT });
  let text;
  try {
    const stopLoad = backgroundLoad(a, b);
    const legacy = (await legacyRun(a, b)).sort((x, y) => x - y);
    const modern = (await modernRun(a, b)).sort((x, y) => x - y);
    await stopLoad();
    const row = (name, ms) =>
      `| ${name} | ${ms.length} | ${pct(ms, 50)} ms | ${pct(ms, 95)} ms | ${pct(ms, 99)} ms | ${ms[ms.length - 1]} ms |`;
    text = [
      `# bench/notify-latency.mjs ${new Date().toISOString()}`,
      '',
      `${os.cpus().length} × ${os.cpus()[0].model}, Node ${process.version}; two instances on one database; tasks run ` +
        `on B, notifications received from A; ${PARALLEL} tasks at a time, background tasks/get on both.`,
      'Latency: arrival at the client − the task\'s lastUpdatedAt (now() of the completing transaction). Target: p99 < 50 ms.',
      '',
      '| path | tasks | p50 | p95 | p99 | max |',
      '|---|---|---|---|---|---|',
      row('2025-11-25 GET stream on A, tasks on B', legacy),
      row('2026-07-28 subscriptions/listen on A, tasks on B', modern),
      '',
    ].join('\n');
  } finally {
    await Promise.all([stopServer(a), stopServer(b)]);
    await scratch.drop();
  }
  console.log(text);
  mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
  const file = join(ROOT, 'bench', 'results', `notify-latency-${new Date().toISOString().replace(/[:.]/g, '-')}.md`);
  writeFileSync(file, text);
  console.log(`written to ${file}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
