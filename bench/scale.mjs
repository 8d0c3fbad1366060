// Scale benchmark (issue 11): tasks/get and task creation on a near-empty task table against one holding 1M
// finished rows and 10,000 live tasks, and tasks/get while the janitor deletes those 1M rows. Not run in CI.
//
//   npm run build && TEST_DATABASE_URL=postgres://user@127.0.0.1:5432/postgres node bench/scale.mjs
//
// Env: SCALE_ROWS (finished rows, default 1000000), SCALE_LIVE (live tasks, default 10000), BENCH_CLIENTS
// (default 32), SCALE_PAIRS × SCALE_WINDOW_SECONDS (paired windows, default 4 × 5 s), JANITOR_DUTY_PERCENT
// and SCALE_JANITOR_BATCH (the deleting instance's; defaults: 10 and the server's JANITOR_BATCH_SIZE).
//
// Two servers (janitor off), one on a near-empty scratch database, one on a database filled with the rows
// (1,000 owners; the live tasks parked input_required; the finished rows already past their ttl). The load
// alternates between them window by window, so both sides of a ratio see the same machine:
//   tasks/get   of a finished task per client;   creation   2025-11-25 tools/call echo_task with task
//   janitor     a third instance on the full database (janitor on, 1 s interval, no grace) deletes the rows,
//               its windows alternating with windows where it is frozen (SIGSTOP); rows/s from its
//               mcp_janitor_rows_total over the running windows
// The table goes to stdout and to bench/results/scale-<timestamp>.md.
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { admin, legacyRpc, openLegacySession, pct, spawnServer } from './bench-support.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const ROWS = Number(process.env.SCALE_ROWS ?? 1_000_000);
const LIVE = Number(process.env.SCALE_LIVE ?? 10_000);
const PAIRS = Number(process.env.SCALE_PAIRS ?? 4);
const WINDOW = Number(process.env.SCALE_WINDOW_SECONDS ?? 5);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 32);
const DUTY = process.env.JANITOR_DUTY_PERCENT ?? '10';
// JANITOR_BATCH_SIZE of the deleting instance (default: the server's default).
const BATCH = process.env.SCALE_JANITOR_BATCH;

const serverUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
if (!serverUrl) {
  console.error('Set TEST_DATABASE_URL (a PostgreSQL server on which a scratch database is created).');
  process.exit(2);
}

const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS * 2 });
const call = (url, sid, method, params) => legacyRpc(agent, url, sid, method, params);
const openSession = (url) => openLegacySession(agent, url, 'scale');

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

/** Latencies (ms) of CLIENTS closed loops of `op` over `seconds`, no warm-up (the loops are already warm). */
async function windowLatencies(states, op, seconds) {
  let running = true;
  const lat = [];
  const loops = states.map(async (s) => {
    while (running) {
      const t = performance.now();
      try {
        await op(s);
        lat.push(performance.now() - t);
      } catch {
        /* counted by the phases above; here only latencies matter */
      }
    }
  });
  await new Promise((r) => setTimeout(r, seconds * 1000));
  running = false;
  await Promise.all(loops);
  return lat;
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

async function scratch(tag) {
  const name = `bench_scale_${tag}_${randomBytes(4).toString('hex')}`;
  await admin(serverUrl, `CREATE DATABASE "${name}"`);
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  return { name, url: u.toString() };
}

/** Alternates windows of opA and opB (which goes first alternates too): their latencies and rates. */
async function paired(opA, opB) {
  const a = [];
  const b = [];
  let secsA = 0;
  let secsB = 0;
  for (let k = 0; k < PAIRS; k++) {
    for (const side of k % 2 === 0 ? ['a', 'b'] : ['b', 'a']) {
      const t = performance.now();
      const lat = await (side === 'a' ? opA() : opB());
      const secs = (performance.now() - t) / 1000;
      if (side === 'a') {
        a.push(...lat);
        secsA += secs;
      } else {
        b.push(...lat);
        secsB += secs;
      }
    }
  }
  const sum = (l, secs) => {
    l.sort((x, y) => x - y);
    return { rate: l.length / secs, p50: pct(l, 50), p99: pct(l, 99) };
  };
  return { a: sum(a, secsA), b: sum(b, secsB) };
}

async function main() {
  const empty = await scratch('empty');
  const full = await scratch('full');
  const env = {
    PORT: '0',
    MCP_BENCH_TOOLS: 'true',
    LOG_LEVEL: 'log',
    DB_POOL_MAX: '20',
    TASK_MAX_PER_OWNER: '1000000',
    TASK_MAX_TOTAL: '100000000',
    QUOTA_RETAINED_TASKS_PER_OWNER: '100000000',
    RATE_LIMIT_PRINCIPAL_RPS: '0',
    RATE_LIMIT_ADDRESS_RPS: '0',
    JANITOR_ENABLED: 'false',
  };
  const start = (db, label) =>
    spawnServer([join(ROOT, 'dist', 'src', 'main.js')], { ...env, DATABASE_URL: db.url }, { label, cwd: ROOT });
  const servers = [];
  const out = [];
  try {
    const onEmpty = await start(empty, 'near-empty');
    servers.push(onEmpty);
    const onFull = await start(full, 'full'); // migrates the full database before it is filled
    servers.push(onFull);
    const fillSeconds = await fill(full.url);
    console.log(`filled ${ROWS} finished + ${LIVE} live rows in ${fillSeconds.toFixed(0)} s`);
    const clientsOf = (server) =>
      Promise.all(
        Array.from({ length: CLIENTS }, async () => {
          const sid = await openSession(server.url);
          return { sid, taskId: await finishedTask(server.url, sid) };
        }),
      );
    const clientsE = await clientsOf(onEmpty);
    const clientsF = await clientsOf(onFull);
    const get = (server) => (c) => call(server.url, c.sid, 'tasks/get', { taskId: c.taskId });
    const create = (server) => (c) => createTask(server.url, c.sid);
    await windowLatencies(clientsE, get(onEmpty), 2);
    await windowLatencies(clientsF, get(onFull), 2);
    const gets = await paired(
      () => windowLatencies(clientsE, get(onEmpty), WINDOW),
      () => windowLatencies(clientsF, get(onFull), WINDOW),
    );
    console.log('tasks/get', JSON.stringify(gets));
    const creates = await paired(
      () => windowLatencies(clientsE, create(onEmpty), WINDOW),
      () => windowLatencies(clientsF, create(onFull), WINDOW),
    );
    console.log('creation', JSON.stringify(creates));

    // The janitor phase: a second instance on the full database deletes the 1M expired rows while the first
    // serves tasks/get; its windows alternate with windows where that instance is frozen (SIGSTOP).
    const sweeper = await spawnServer(
      [join(ROOT, 'dist', 'src', 'main.js')],
      {
        ...env,
        DATABASE_URL: full.url,
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
    let sweep;
    try {
      await windowLatencies(clientsF, get(onFull), 2); // the sweeper starts its first run
      sweep = await paired(
        async () => {
          const before = await scrape(sweeper.base, 'mcp_janitor_rows_total', 'action="delete"');
          const t = performance.now();
          const lat = await windowLatencies(clientsF, get(onFull), WINDOW);
          sweepSeconds += (performance.now() - t) / 1000;
          deleted += (await scrape(sweeper.base, 'mcp_janitor_rows_total', 'action="delete"')) - before;
          return lat;
        },
        async () => {
          sweeper.proc.kill('SIGSTOP');
          try {
            return await windowLatencies(clientsF, get(onFull), WINDOW);
          } finally {
            sweeper.proc.kill('SIGCONT');
          }
        },
      );
    } finally {
      await stop(sweeper);
    }
    console.log('janitor', JSON.stringify({ sweep, deleted, sweepSeconds }));

    const f = (n, d = 0) => n.toFixed(d);
    const ratio = (x, y) => `${(x / y).toFixed(2)}×`;
    out.push(
      `# bench/scale.mjs ${new Date().toISOString()}`,
      '',
      `${os.cpus().length} × ${os.cpus()[0].model}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ` +
        `${CLIENTS} closed-loop clients. Two servers, one on a near-empty database and one on a database holding ` +
        `${ROWS} finished rows over 1,000 owners and ${LIVE} live (input_required) tasks (inserted in ${f(fillSeconds)} s); ` +
        `${PAIRS} paired ${WINDOW} s windows alternating between them (and, for the janitor, between its instance ` +
        `running and frozen), so both sides of each ratio see the same machine. JANITOR_BATCH_SIZE ${BATCH ?? 'default'}, ` +
        `JANITOR_DUTY_PERCENT ${DUTY}.`,
      '',
      '| measure | baseline | measured | ratio | target |',
      '|---|---|---|---|---|',
      `| tasks/get p99: near-empty vs 1M finished + ${LIVE} live | ${f(gets.a.p99, 2)} ms (${f(gets.a.rate)}/s) | ${f(gets.b.p99, 2)} ms (${f(gets.b.rate)}/s) | ${ratio(gets.b.p99, gets.a.p99)} | ≤ 1.2× |`,
      `| task creation rate: near-empty vs full | ${f(creates.a.rate)}/s (p99 ${f(creates.a.p99, 2)} ms) | ${f(creates.b.rate)}/s (p99 ${f(creates.b.p99, 2)} ms) | ${ratio(creates.b.rate, creates.a.rate)} | ≥ 0.9× |`,
      `| tasks/get p99 on the full database: janitor frozen vs deleting | ${f(sweep.b.p99, 2)} ms (${f(sweep.b.rate)}/s) | ${f(sweep.a.p99, 2)} ms (${f(sweep.a.rate)}/s) | ${ratio(sweep.a.p99, sweep.b.p99)} | < 1.2× |`,
      '',
      `Janitor: ${deleted} expired rows deleted in ${f(sweepSeconds, 1)} s of running windows by one instance = ` +
        `${f(deleted / sweepSeconds)} rows/s (1 s interval).`,
    );
  } finally {
    await Promise.all(servers.map(stop));
    for (const db of [empty, full]) {
      await admin(serverUrl, `DROP DATABASE IF EXISTS "${db.name}" WITH (FORCE)`).catch(() => undefined);
    }
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
