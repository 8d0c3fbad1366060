// Scale benchmark (issue 11): the same load on a near-empty task table and on one holding 1M finished rows
// and 10,000 live tasks, then while the janitor deletes those 1M rows. Not run in CI.
//
//   npm run build && TEST_DATABASE_URL=postgres://user@127.0.0.1:5432/postgres node bench/scale.mjs
//
// Env: SCALE_ROWS (finished rows, default 1000000), SCALE_LIVE (live tasks, default 10000), BENCH_SECONDS
// (window, default 10), BENCH_CLIENTS (default 32), JANITOR_DUTY_PERCENT (the deleting instance's, default 10),
// SCALE_SWEEP_MAX_SECONDS (stop timing the sweep after this long, default 900).
//
// Phases, on one server (janitor off) and one scratch database:
//   empty      tasks/get of finished tasks, and task creation (2025-11-25 tools/call echo_task with task)
//   full       the same after the rows are inserted (1,000 owners; live tasks parked input_required)
//   janitor    tasks/get while a second instance (janitor on, 1 s interval, no grace) deletes the 1M rows,
//              which were written already past their ttl; rows/s from its mcp_janitor_rows_total
// The table goes to stdout and to bench/results/scale-<timestamp>.md.
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { admin, pct, spawnServer } from './bench-support.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const ROWS = Number(process.env.SCALE_ROWS ?? 1_000_000);
const LIVE = Number(process.env.SCALE_LIVE ?? 10_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 32);
const DUTY = process.env.JANITOR_DUTY_PERCENT ?? '10';
// Stop timing the sweep after this long and report the rate so far (the rows left are dropped with the database).
// JANITOR_BATCH_SIZE of the deleting instance (default: the server's default).
const BATCH = process.env.SCALE_JANITOR_BATCH;
const SWEEP_MAX_SECONDS = Number(process.env.SCALE_SWEEP_MAX_SECONDS ?? 900);
const LEGACY = '2025-11-25';

const serverUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
if (!serverUrl) {
  console.error('Set TEST_DATABASE_URL (a PostgreSQL server on which a scratch database is created).');
  process.exit(2);
}

const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS * 2 });
let rpcId = 0;

function post(url, body, headers = {}) {
  const data = JSON.stringify(body);
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'content-length': Buffer.byteLength(data),
          ...headers,
        },
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          resolve({ status: res.statusCode, headers: res.headers, json: text ? JSON.parse(text) : undefined });
        });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

async function call(url, sid, method, params) {
  const headers = { 'mcp-protocol-version': LEGACY, ...(sid ? { 'mcp-session-id': sid } : {}) };
  const a = await post(url, { jsonrpc: '2.0', id: ++rpcId, method, params }, headers);
  if (a.status >= 300 || !a.json || a.json.error) throw new Error(`${method}: HTTP ${a.status} ${JSON.stringify(a.json)}`);
  return a.json.result;
}

async function openSession(url) {
  const init = await post(url, {
    jsonrpc: '2.0',
    id: ++rpcId,
    method: 'initialize',
    params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'scale', version: '1.0.0' } },
  });
  const sid = init.headers['mcp-session-id'];
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, { 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY });
  return sid;
}

const createTask = (url, sid) =>
  call(url, sid, 'tools/call', { name: 'echo_task', arguments: { text: 'scale' }, task: { ttl: 600000 } });

/** A finished task of this session: created, then polled until completed. */
async function finishedTask(url, sid) {
  const { task } = await createTask(url, sid);
  for (;;) {
    const t = await call(url, sid, 'tasks/get', { taskId: task.taskId });
    if (t.status === 'completed') return task.taskId;
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** CLIENTS closed loops of `op` for SECONDS after a 2 s warm-up: ops/s and p99 (ms). */
async function closedLoop(states, op) {
  let phase = 'warmup';
  const lat = [];
  let errors = 0;
  let firstError;
  const loops = states.map(async (s) => {
    while (phase !== 'done') {
      const t = performance.now();
      try {
        await op(s);
        if (phase === 'measure') lat.push(performance.now() - t);
      } catch (err) {
        errors++;
        firstError ??= err instanceof Error ? err.message : String(err);
      }
    }
  });
  await new Promise((r) => setTimeout(r, 2000));
  phase = 'measure';
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  phase = 'done';
  const secs = (performance.now() - t0) / 1000;
  await Promise.all(loops);
  lat.sort((a, b) => a - b);
  return { rate: lat.length / secs, p50: pct(lat, 50), p99: pct(lat, 99), errors, ...(firstError ? { firstError } : {}) };
}

async function measurePhase(url, clients) {
  const get = await closedLoop(clients, (s) => call(url, s.sid, 'tasks/get', { taskId: s.taskId }));
  const create = await closedLoop(clients, (s) => createTask(url, s.sid));
  return { get, create };
}

async function scrape(base, name, label) {
  const text = await new Promise((resolve, reject) =>
    http.get(`${base}/metrics`, (res) => {
      let b = '';
      res.on('data', (c) => (b += c));
      res.on('end', () => resolve(b));
    }).on('error', reject),
  );
  for (const line of text.split('\n')) {
    if (line.startsWith(name) && line.includes(label)) return Number(line.split(' ').pop());
  }
  return 0;
}

async function fill(db) {
  const c = new pg.Client({ connectionString: db });
  await c.connect();
  try {
    const t0 = performance.now();
    // Finished rows already past ttl (the janitor phase deletes them; the first two phases run with it off).
    await c.query(
      `INSERT INTO task (id, owner_id, era, tool_name, status, status_message, created_at, last_updated_at, ttl_ms,
                         expires_at, poll_interval_ms, request_params, result)
       SELECT 'scale-done-' || g, 'scale-owner-' || (g % 1000), 'legacy', 'echo_task', 'completed', NULL,
              now() - interval '3 hours' + g * interval '1 millisecond', now() - interval '2 hours', 3600000,
              now() - interval '1 hour' - g * interval '1 millisecond', 1000,
              '{"name":"echo_task","arguments":{"text":"scale"}}',
              '{"content":[{"type":"text","text":"scale"}]}'
         FROM generate_series(1, $1::int) g`,
      [ROWS],
    );
    await c.query(
      `INSERT INTO task (id, owner_id, era, tool_name, status, status_message, created_at, last_updated_at, ttl_ms,
                         expires_at, poll_interval_ms, request_params, input_requests, input_rounds)
       SELECT 'scale-live-' || g, 'scale-owner-' || (g % 1000), 'modern', 'echo_task', 'input_required',
              'Waiting for input', now(), now(), 86400000, now() + interval '1 day', 1000,
              '{"name":"echo_task","arguments":{}}',
              '{"r1.q":{"method":"elicitation/create","params":{}}}', 1
         FROM generate_series(1, $1::int) g`,
      [LIVE],
    );
    await c.query('VACUUM ANALYZE task');
    return (performance.now() - t0) / 1000;
  } finally {
    await c.end();
  }
}

function stop(server) {
  return new Promise((resolve) => {
    server.proc.once('exit', resolve);
    server.proc.kill('SIGTERM');
    setTimeout(() => server.proc.kill('SIGKILL'), 15000).unref();
  });
}

async function main() {
  const dbName = `bench_scale_${randomBytes(4).toString('hex')}`;
  await admin(serverUrl, `CREATE DATABASE "${dbName}"`);
  const u = new URL(serverUrl);
  u.pathname = `/${dbName}`;
  const db = u.toString();
  const env = {
    PORT: '0',
    DATABASE_URL: db,
    MCP_BENCH_TOOLS: 'true',
    LOG_LEVEL: 'log',
    DB_POOL_MAX: '20',
    TASK_MAX_PER_OWNER: '1000000',
    TASK_MAX_TOTAL: '100000000',
    QUOTA_RETAINED_TASKS_PER_OWNER: '100000000',
    RATE_LIMIT_PRINCIPAL_RPS: '0',
    RATE_LIMIT_ADDRESS_RPS: '0',
  };
  const main = await spawnServer([join(ROOT, 'dist', 'src', 'main.js')], { ...env, JANITOR_ENABLED: 'false' }, { cwd: ROOT });
  const out = [];
  try {
    const clients = await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        const sid = await openSession(main.url);
        return { sid, taskId: await finishedTask(main.url, sid) };
      }),
    );
    const empty = await measurePhase(main.url, clients);
    console.log('empty', JSON.stringify(empty));
    const fillSeconds = await fill(db);
    console.log(`filled ${ROWS} finished + ${LIVE} live rows in ${fillSeconds.toFixed(0)} s`);
    const full = await measurePhase(main.url, clients);
    console.log('full', JSON.stringify(full));

    // The janitor phase: a second instance deletes the 1M expired rows while the first serves tasks/get.
    const sweeper = await spawnServer(
      [join(ROOT, 'dist', 'src', 'main.js')],
      {
        ...env,
        JANITOR_ENABLED: 'true',
        JANITOR_INTERVAL_MS: '1000',
        TASK_EXPIRED_GRACE_MS: '0',
        JANITOR_DUTY_PERCENT: DUTY,
        ...(BATCH ? { JANITOR_BATCH_SIZE: BATCH } : {}),
      },
      { label: 'sweeper', cwd: ROOT },
    );
    let deleted = 0;
    let sweepSeconds = 0;
    let during;
    try {
      const t0 = performance.now();
      during = await closedLoop(clients, (s) => call(main.url, s.sid, 'tasks/get', { taskId: s.taskId }));
      console.log('during the sweep', JSON.stringify(during));
      for (;;) {
        deleted = await scrape(sweeper.base, 'mcp_janitor_rows_total', 'action="delete"');
        if (deleted >= ROWS || performance.now() - t0 > SWEEP_MAX_SECONDS * 1000) break;
        await new Promise((r) => setTimeout(r, 500));
      }
      sweepSeconds = (performance.now() - t0) / 1000;
    } finally {
      await stop(sweeper);
    }
    console.log('janitor', JSON.stringify({ during, deleted, sweepSeconds }));

    const f = (n, d = 0) => n.toFixed(d);
    const ratio = (a, b) => `${(a / b).toFixed(2)}×`;
    out.push(
      `# bench/scale.mjs ${new Date().toISOString()}`,
      '',
      `${os.cpus().length} × ${os.cpus()[0].model}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ` +
        `${CLIENTS} closed-loop clients, ${SECONDS} s windows after 2 s warm-up; ${ROWS} finished rows over 1,000 owners ` +
        `and ${LIVE} live (input_required) tasks inserted in ${f(fillSeconds)} s; JANITOR_BATCH_SIZE ${BATCH ?? 'default'}, JANITOR_DUTY_PERCENT ${DUTY}`,
      '',
      '| measure | near-empty table | 1M finished + live rows | ratio | target |',
      '|---|---|---|---|---|',
      `| tasks/get p99 | ${f(empty.get.p99, 2)} ms (${f(empty.get.rate)}/s) | ${f(full.get.p99, 2)} ms (${f(full.get.rate)}/s) | ${ratio(full.get.p99, empty.get.p99)} | ≤ 1.2× |`,
      `| task creation rate | ${f(empty.create.rate)}/s (p99 ${f(empty.create.p99, 2)} ms) | ${f(full.create.rate)}/s (p99 ${f(full.create.p99, 2)} ms) | ${ratio(full.create.rate, empty.create.rate)} | ≥ 0.9× |`,
      `| tasks/get p99 while the janitor deletes | ${f(full.get.p99, 2)} ms | ${f(during.p99, 2)} ms (${f(during.rate)}/s) | ${ratio(during.p99, full.get.p99)} | < 1.2× |`,
      '',
      `Janitor: ${deleted} of ${ROWS} expired rows deleted in ${f(sweepSeconds, 1)} s by one instance = ${f(deleted / sweepSeconds)} rows/s ` +
        `(1 s interval, JANITOR_BATCH_SIZE ${BATCH ?? 'default'}, ${DUTY}% duty). Errors: ${empty.get.errors + empty.create.errors + full.get.errors + full.create.errors + during.errors}.`,
    );
  } finally {
    await stop(main);
    await admin(serverUrl, `DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`).catch(() => undefined);
  }
  const text = out.join('\n') + '\n';
  console.log(text);
  mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
  const file = join(ROOT, 'bench', 'results', `scale-${new Date().toISOString().replace(/[:.]/g, '-')}.md`);
  writeFileSync(file, text);
  console.log(`written to ${file}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
