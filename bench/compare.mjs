// Side-by-side benchmark: this server against its peers, same load generator, interleaved runs.
//
//   npm run bench:compare                       (builds first; needs TEST_DATABASE_URL or DATABASE_URL)
//   BENCH_SECONDS=10 BENCH_CLIENTS=32 BENCH_ROUNDS=2 BENCH_ONLY=legacy-inline,tasks-get npm run bench:compare
//   BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" BENCH_PEERS=false ...   (profile this server alone)
//   BENCH_SERVER_MAIN=.data/before/dist/src/main.js ...   (another build of this server, for before/after runs)
//   BENCH_BASELINE_MAIN=.data/before/dist/src/main.js BENCH_PEERS=false BENCH_ROUNDS=12 BENCH_SECONDS=5 ...
//                       (paired before/after: that build runs beside this one in every round, order alternating,
//                        and the report gives this server's rate over the baseline's, round by round)
//   ... BENCH_PAIRING=concurrent   (the two builds run at the same time, each with its own clients and database)
//
// Each scenario runs BENCH_CLIENTS closed-loop clients (each sends its next request when the last one answered)
// for BENCH_SECONDS after a short warm-up, against this server and against the peer that offers the same thing:
//   legacy-inline       2025-11-25 tools/call echo in a session     vs official SDK 1.x with sessions
//   stateless-inline    tools/call echo without a session            vs official SDK 1.x stateless (2025-11-25)
//   modern-inline       2026-07-28 tools/call echo (modern era)   vs @rekog/mcp-nest 2.x
//   legacy-lifecycle    tools/call echo_task with params.task, tasks/get until completed, tasks/result
//                                                                    vs official SDK 1.x in-memory task store
//   queued-lifecycle    the same with 50 ms of work per task (BENCH_QUEUED_WORK_MS), so the clients outnumber
//                       the slots (TASK_WORKER_CONCURRENCY stays at its default 16) and the queue is full (ours only)
//   tasks-get           tasks/get of a finished task                 vs official SDK 1.x in-memory task store
//   modern-lifecycle    2026-07-28 echo_task_required: tools/call → CreateTaskResult, tasks/get until done (ours only)
//   durable-lifecycle   a resumable task (echo_task_durable): tools/call with params.task, tasks/get until completed
//                       (create → claim → complete → read)    vs pg-boss 10 on its own database of the same server:
//                       POST send → work loop fetch + complete → GET getJobById (bench/peers/pg-boss-server.mjs)
//                       BENCH_DURABLE_SPLIT=true runs ours as an INSTANCE_ROLE=web instance taking the calls and an
//                       INSTANCE_ROLE=worker instance claiming the work (CPU of both counted).
// With BENCH_BASELINE_MAIN each round also runs that build (same scenario, a database of its own) right before or
// after this one, alternating; the ratio of the two rates is taken per round, so a machine that is busier in one
// round than in the next moves both sides of that round's ratio. The report gives the geometric mean of those
// paired ratios with a 95 % confidence interval (t over the log ratios), and the same for CPU per op (server plus
// its PostgreSQL backends): a before/after change is shown within x % only when the whole interval is. Run side by
// side (BENCH_PAIRING=concurrent) the two builds share one load generator: when it is the bottleneck both get its
// pace and the rate ratio is pulled towards 1, so there CPU per op is the figure to read.
// Rounds alternate which server goes first. Server CPU comes from /proc/<pid>/stat; PostgreSQL CPU is the
// summed CPU of the backends connected to the scratch database. The table goes to stdout and, with the
// machine's description, to bench/results/compare-<timestamp>.md. Not run in CI.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  admin,
  legacyRpc,
  nextRpcId,
  openLegacySession,
  pct,
  postRpc,
  rpcResult,
  spawnServer,
} from './bench-support.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 32);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const ONLY = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',')) : undefined;
const MODERN = '2026-07-28';
const TICKS = 100; // clock ticks per second of /proc/<pid>/stat on Linux

const serverUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
if (!serverUrl) {
  console.error('Set TEST_DATABASE_URL (a PostgreSQL server on which a scratch database is created).');
  process.exit(2);
}

// ---------- HTTP client: one keep-alive agent, JSON or SSE answers ----------
const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS * 2 });

const post = (url, body, headers = {}) => postRpc(agent, url, body, headers);

/** GET `url` through the agent; resolves to the JSON body, throws on a non-200 answer. */
function getJson(url) {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          if (res.statusCode !== 200) reject(new Error(`GET ${url}: HTTP ${res.statusCode} ${text}`));
          else resolve(JSON.parse(text));
        });
      })
      .on('error', reject);
  });
}

/**
 * durable-lifecycle: a read that did not find the work done waits this long before the next (both sides). A read
 * on the instance or process that ran the work waits for its outcome already; one on a web instance (the worker
 * ran it) cannot, and a client that re-asked at once would measure its own polling, not the queue.
 */
const POLL_PAUSE_MS = Number(process.env.BENCH_POLL_PAUSE_MS ?? 5);
const pause = (ms) => new Promise((r) => setTimeout(r, ms));
/** queued-lifecycle: the work of each task, in ms (long enough that 16 slots bind before the CPU does). */
const QUEUED_WORK_MS = Number(process.env.BENCH_QUEUED_WORK_MS ?? 50);

let polls = 0; // tasks/get calls made by the lifecycle scenarios, reported per lifecycle
const legacyCall = (url, sid, method, params) => legacyRpc(agent, url, sid, method, params);
const openSession = (url) => openLegacySession(agent, url, 'bench');

const EXT = { extensions: { 'io.modelcontextprotocol/tasks': {} } };
async function modernCall(url, method, params, name, caps = {}) {
  const body = {
    jsonrpc: '2.0',
    id: nextRpcId(),
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': MODERN,
        'io.modelcontextprotocol/clientCapabilities': caps,
        'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '1.0.0' },
      },
    },
  };
  const headers = {
    'mcp-protocol-version': MODERN,
    'mcp-method': method,
    ...(name ? { 'mcp-name': name } : {}),
  };
  return rpcResult(await post(url, body, headers), method);
}

const echoArgs = (i) => ({ name: 'echo', arguments: { text: `hello ${i}` } });

// ---------- scenarios: setup(url) per client, then op(state) in a closed loop ----------
async function legacyLifecycle(url, sid) {
  const created = await legacyCall(url, sid, 'tools/call', {
    name: 'echo_task',
    arguments: { text: 'task' },
    task: { ttl: 600000 },
  });
  const taskId = created.task.taskId;
  for (let i = 0; ; i++) {
    const t = await legacyCall(url, sid, 'tasks/get', { taskId });
    polls++;
    if (t.status === 'completed') break;
    if (t.status !== 'working') throw new Error(`task ended ${t.status}`);
    if (i > 10000) throw new Error('task never completed');
  }
  await legacyCall(url, sid, 'tasks/result', { taskId });
  return taskId;
}

const SCENARIOS = [
  {
    name: 'legacy-inline',
    what: '2025-11-25 tools/call echo, in a session',
    peer: ['sdk', 'sessions'],
    setup: async (url) => ({ url, sid: await openSession(url) }),
    op: (s, i) => legacyCall(s.url, s.sid, 'tools/call', echoArgs(i)),
  },
  {
    // This server serves sessionless calls in the 2026-07-28 era; the SDK 1.x peer in its stateless 2025-11-25 mode.
    name: 'stateless-inline',
    what: 'tools/call echo without a session (ours 2026-07-28, SDK stateless 2025-11-25)',
    peer: ['sdk', 'stateless'],
    setup: async (url) => ({ url }),
    op: (s, i) => modernCall(s.url, 'tools/call', echoArgs(i), 'echo'),
    peerOp: (s, i) => legacyCall(s.url, undefined, 'tools/call', echoArgs(i)),
  },
  {
    name: 'modern-inline',
    what: '2026-07-28 tools/call echo (modern era)',
    peer: ['mcp-nest'],
    setup: async (url) => ({ url }),
    op: (s, i) => modernCall(s.url, 'tools/call', echoArgs(i), 'echo'),
  },
  {
    name: 'legacy-lifecycle',
    what: '2025-11-25 task: create, tasks/get until done, tasks/result',
    peer: ['sdk', 'tasks'],
    setup: async (url) => ({ url, sid: await openSession(url) }),
    op: (s) => legacyLifecycle(s.url, s.sid),
  },
  {
    // Work that holds the slots: 32 clients of a 50 ms task on 16 slots keep the queue full, so each slot that
    // frees must go to the next queued task at once (reads 5 ms apart, as durable-lifecycle's).
    name: 'queued-lifecycle',
    what: '2025-11-25 task of 50 ms work, more clients than slots: create, tasks/get until done, tasks/result',
    peer: undefined,
    setup: async (url) => ({ url, sid: await openSession(url) }),
    op: async (s) => {
      const created = await legacyCall(s.url, s.sid, 'tools/call', {
        name: 'echo_task',
        arguments: { text: 'task', delayMs: QUEUED_WORK_MS },
        task: { ttl: 600000 },
      });
      const taskId = created.task.taskId;
      for (let i = 0; ; i++) {
        const t = await legacyCall(s.url, s.sid, 'tasks/get', { taskId });
        polls++;
        if (t.status === 'completed') break;
        if (t.status !== 'working') throw new Error(`task ended ${t.status}`);
        if (i > 100000) throw new Error('task never completed');
        await pause(POLL_PAUSE_MS);
      }
      await legacyCall(s.url, s.sid, 'tasks/result', { taskId });
    },
  },
  {
    name: 'tasks-get',
    what: '2025-11-25 tasks/get of a finished task',
    peer: ['sdk', 'tasks'],
    setup: async (url) => {
      const sid = await openSession(url);
      return { url, sid, taskId: await legacyLifecycle(url, sid) };
    },
    op: (s) => legacyCall(s.url, s.sid, 'tasks/get', { taskId: s.taskId }),
  },
  {
    name: 'durable-lifecycle',
    what: 'resumable task: create, claim, complete, read (tools/call, tasks/get until done)',
    peer: ['pg-boss'],
    setup: async (url) => ({ url, sid: await openSession(url) }),
    op: async (s) => {
      const created = await legacyCall(s.url, s.sid, 'tools/call', {
        name: 'echo_task_durable',
        arguments: { text: 'task' },
        task: { ttl: 600000 },
      });
      const taskId = created.task.taskId;
      for (let i = 0; ; i++) {
        const t = await legacyCall(s.url, s.sid, 'tasks/get', { taskId });
        polls++;
        if (t.status === 'completed') return;
        if (t.status !== 'working') throw new Error(`task ended ${t.status}`);
        if (i > 10000) throw new Error('task never completed');
        await pause(POLL_PAUSE_MS);
      }
    },
    peerSetup: async (url) => ({ url }),
    peerOp: async (s, i) => {
      const sent = await post(s.url, { text: `task ${i}` });
      if (sent.status !== 200) throw new Error(`send: HTTP ${sent.status} ${JSON.stringify(sent.json)}`);
      for (let n = 0; ; n++) {
        const job = await getJson(`${s.url}/${sent.json.id}`);
        polls++;
        if (job.state === 'completed') return;
        if (job.state !== 'created' && job.state !== 'active') throw new Error(`job ended ${job.state}`);
        if (n > 10000) throw new Error('job never completed');
        await pause(POLL_PAUSE_MS);
      }
    },
  },
  {
    name: 'modern-lifecycle',
    what: '2026-07-28 required task: tools/call, tasks/get until done',
    peer: undefined,
    setup: async (url) => ({ url }),
    op: async (s) => {
      const created = await modernCall(
        s.url,
        'tools/call',
        { name: 'echo_task_required', arguments: { text: 'task' } },
        'echo_task_required',
        EXT,
      );
      if (created.resultType !== 'task') throw new Error(`expected a task: ${JSON.stringify(created)}`);
      for (let i = 0; ; i++) {
        const t = await modernCall(s.url, 'tasks/get', { taskId: created.taskId }, created.taskId, EXT);
        polls++;
        if (t.status === 'completed') return;
        if (t.status !== 'working') throw new Error(`task ended ${t.status}`);
        if (i > 10000) throw new Error('task never completed');
      }
    },
  },
].filter((s) => !ONLY || ONLY.has(s.name));

// ---------- processes ----------
function cpuSeconds(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS; // utime + stime
  } catch {
    return 0;
  }
}

/** CPU of the PostgreSQL backends serving `database` (their command line names it). */
function pgCpuSeconds(database) {
  if (!database) return 0;
  let sum = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cmd.startsWith('postgres:') && cmd.includes(` ${database} `)) sum += cpuSeconds(pid);
    } catch {
      // the backend ended while being read
    }
  }
  return sum;
}

async function stop(server) {
  for (const other of server.extra ?? []) await stop(other);
  if (server.proc.exitCode !== null) return;
  const gone = new Promise((r) => server.proc.once('exit', r));
  server.proc.kill('SIGTERM');
  await Promise.race([gone, new Promise((r) => setTimeout(r, 15000))]);
  if (server.proc.exitCode === null) server.proc.kill('SIGKILL');
}

const SPLIT = process.env.BENCH_DURABLE_SPLIT === 'true';

/**
 * This server on `dbName`. For durable-lifecycle with BENCH_DURABLE_SPLIT=true: a web instance (the one the
 * clients talk to) and a worker instance beside it (`extra`, whose CPU counts too).
 */
const BASELINE_MAIN = process.env.BENCH_BASELINE_MAIN;
/** BENCH_BASELINE_ENV (URL-encoded): settings for the baseline alone, e.g. the same build with a feature off. */
const BASELINE_ENV = Object.fromEntries(new URLSearchParams(process.env.BENCH_BASELINE_ENV ?? ''));
/** How the report names the baseline: BENCH_BASELINE_LABEL (say, the commit it was built from), else its path. */
const BASELINE_LABEL =
  process.env.BENCH_BASELINE_LABEL ?? (BASELINE_MAIN ? `\`${relative(ROOT, BASELINE_MAIN)}\`` : '');
/** BENCH_PAIRING=concurrent: the baseline runs at the same time as this build instead of right before or after. */
const CONCURRENT = Boolean(BASELINE_MAIN) && process.env.BENCH_PAIRING === 'concurrent';

async function startOurs(dbName, scenario, main, label = 'this server', env = {}) {
  if (SPLIT && scenario.name === 'durable-lifecycle') {
    const worker = await startOne(dbName, { ...env, INSTANCE_ROLE: 'worker' }, `${label} (worker)`, main);
    try {
      const web = await startOne(dbName, { ...env, INSTANCE_ROLE: 'web' }, `${label} (web + worker)`, main);
      return { ...web, extra: [worker] };
    } catch (err) {
      await stop(worker);
      throw err;
    }
  }
  return startOne(dbName, env, label, main);
}

async function startOne(dbName, roleEnv, label, main) {
  const u = new URL(serverUrl);
  u.pathname = `/${dbName}`;
  const nodeArgs = process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(' ') : [];
  return spawnServer(
    [...nodeArgs, main ?? process.env.BENCH_SERVER_MAIN ?? join(ROOT, 'dist', 'src', 'main.js')],
    {
      PORT: '0',
      DATABASE_URL: u.toString(),
      MCP_BENCH_TOOLS: 'true',
      LOG_LEVEL: 'log', // 'listening on' is a log-level line; nothing is logged per request at this level
      DB_POOL_MAX: '20',
      // The bench is one principal with many tasks and requests: lift the per-owner limits out of its way.
      TASK_MAX_PER_OWNER: '1000000',
      TASK_MAX_TOTAL: '100000000',
      QUOTA_RETAINED_TASKS_PER_OWNER: '100000000',
      // The load generator is one principal at one address: the per-principal and per-address rate limits would
      // measure themselves, not the server (the peers have none).
      RATE_LIMIT_PRINCIPAL_RPS: '0',
      RATE_LIMIT_ADDRESS_RPS: '0',
      // TASK_WORKER_CONCURRENCY stays at its default (16): the 32 clients are more than the slots, as a burst of
      // short tasks from many clients is in use. BENCH_SERVER_ENV=TASK_WORKER_CONCURRENCY=… measures tuned ones.
      ...(process.env.BENCH_SERVER_ENV
        ? Object.fromEntries(new URLSearchParams(process.env.BENCH_SERVER_ENV))
        : {}),
      ...roleEnv,
    },
    { label, cwd: ROOT },
  );
}

async function startPgBoss(dbName) {
  const u = new URL(serverUrl);
  u.pathname = `/${dbName}`;
  const peer = await spawnServer(
    [join(ROOT, 'bench', 'peers', 'pg-boss-server.mjs')],
    {
      DATABASE_URL: u.toString(),
      ...(process.env.BENCH_PGBOSS_WORKERS ? { BENCH_PGBOSS_WORKERS: process.env.BENCH_PGBOSS_WORKERS } : {}),
      ...(process.env.BENCH_PGBOSS_BATCH ? { BENCH_PGBOSS_BATCH: process.env.BENCH_PGBOSS_BATCH } : {}),
    },
    { label: 'pg-boss', cwd: ROOT },
  );
  return { ...peer, url: `${peer.base}/jobs` };
}

const startPeer = ([kind, mode], dbName) =>
  kind === 'pg-boss'
    ? startPgBoss(dbName)
    : kind === 'sdk'
      ? spawnServer(
          [join(ROOT, 'bench', 'peers', 'sdk-server.mjs'), mode],
          {},
          { label: `SDK ${mode}`, cwd: ROOT },
        )
      : spawnServer(
          [join(ROOT, 'bench', 'peers', 'mcp-nest-server.mjs')],
          {},
          { label: '@rekog/mcp-nest', cwd: ROOT },
        );

// ---------- the closed loop ----------
async function measure(setup, server, database, op) {
  const states = await Promise.all(Array.from({ length: CLIENTS }, () => setup(server.url)));
  const latencies = [];
  let errors = 0;
  let firstError;
  let phase = 'warmup';
  let count = 0;
  const loops = states.map(async (state, c) => {
    let i = 0;
    while (phase !== 'done') {
      const started = performance.now();
      try {
        await op(state, c * 1_000_000 + i++);
        if (phase === 'measure') {
          latencies.push(performance.now() - started);
          count++;
        }
      } catch (err) {
        errors++;
        firstError ??= err;
      }
    }
  });
  await new Promise((r) => setTimeout(r, WARMUP_SECONDS * 1000));
  const procs = [server.proc, ...(server.extra ?? []).map((e) => e.proc)];
  const serverCpu = () => procs.reduce((sum, p) => sum + cpuSeconds(p.pid), 0);
  const cpu0 = serverCpu();
  const polls0 = polls;
  const pg0 = pgCpuSeconds(database);
  const t0 = performance.now();
  phase = 'measure';
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  phase = 'done';
  const elapsed = (performance.now() - t0) / 1000;
  const pollsPerOp = count ? (polls - polls0) / count : 0;
  const cpu = serverCpu() - cpu0;
  const pgCpu = pgCpuSeconds(database) - pg0;
  await Promise.all(loops);
  if (firstError) console.error(`  ${server.label}: ${errors} errors, first: ${firstError.message}`);
  latencies.sort((a, b) => a - b);
  return {
    rate: count / elapsed,
    p50: pct(latencies, 50) ?? NaN,
    p99: pct(latencies, 99) ?? NaN,
    cpuMs: count ? (cpu * 1000) / count : NaN,
    pgCpuMs: count ? (pgCpu * 1000) / count : NaN,
    errors,
    pollsPerOp,
  };
}

/** One run's line: what the report's tables are made of, printed as each run ends. */
function logRun(scenario, round, label, r) {
  console.log(
    `${scenario.name} round ${round + 1} ${label}: ${r.rate.toFixed(0)}/s p50 ${r.p50.toFixed(1)} ms ` +
      `p99 ${r.p99.toFixed(1)} ms cpu ${r.cpuMs.toFixed(2)} ms/op pg ${r.pgCpuMs.toFixed(2)} ms/op` +
      (r.pollsPerOp ? ` tasks/get per lifecycle ${r.pollsPerOp.toFixed(1)}` : ''),
  );
}

function mergeRuns(runs) {
  const avg = (k) => runs.reduce((s, r) => s + r[k], 0) / runs.length;
  return {
    rates: runs.map((r) => r.rate),
    rate: avg('rate'),
    p99: Math.max(...runs.map((r) => r.p99)),
    cpuMs: avg('cpuMs'),
    pgCpuMs: avg('pgCpuMs'),
    errors: runs.reduce((s, r) => s + r.errors, 0),
  };
}

/** Two-sided 97.5 % quantiles of Student's t for 1..30 degrees of freedom (a 95 % interval); 1.96 beyond. */
const T975 = [
  12.71, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131,
  2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/**
 * This build's rate over the baseline's, round by round (each pair ran back to back), summarised as the geometric
 * mean with a 95 % confidence interval: the log ratios' mean ± t·s/√n. Ratios, not differences, since the machine's
 * speed scales both rates of a round alike.
 */
function pairedRatio(ours, baseline) {
  const rate = geometricMean(ours.map((r, i) => r.rate / baseline[i].rate));
  const cpu = geometricMean(
    ours.map((r, i) => (r.cpuMs + r.pgCpuMs) / (baseline[i].cpuMs + baseline[i].pgCpuMs)),
  );
  return { ...rate, cpu, baseline: mergeRuns(baseline) };
}

/** Geometric mean of ratios with its 95 % confidence interval (t over the logs). */
function geometricMean(ratios) {
  const logs = ratios.map(Math.log);
  const n = logs.length;
  const mean = logs.reduce((a, b) => a + b, 0) / n;
  const sd = n > 1 ? Math.sqrt(logs.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1)) : NaN;
  const half = n > 1 ? (T975[n - 2] ?? 1.96) * (sd / Math.sqrt(n)) : NaN;
  return { ratios, mean: Math.exp(mean), low: Math.exp(mean - half), high: Math.exp(mean + half) };
}

// ---------- main ----------
const results = [];
for (const scenario of SCENARIOS) {
  const ours = [];
  const peer = [];
  const baseline = [];
  for (let round = 0; round < ROUNDS; round++) {
    // Every run gets its own database, so one run's tasks never slow the next one.
    const dbName = `bench_cmp_${randomBytes(4).toString('hex')}`;
    await admin(serverUrl, `CREATE DATABASE "${dbName}"`);
    // A peer that keeps its state in PostgreSQL (pg-boss) gets a database of its own on the same server.
    const peerDb = scenario.peer?.[0] === 'pg-boss' ? `${dbName}_peer` : undefined;
    if (peerDb) await admin(serverUrl, `CREATE DATABASE "${peerDb}"`);
    // The baseline build gets a database of its own too, so neither build's rows slow the other's run.
    const baseDb = BASELINE_MAIN ? `${dbName}_base` : undefined;
    if (baseDb) await admin(serverUrl, `CREATE DATABASE "${baseDb}"`);
    const pair = BASELINE_MAIN ? (round % 2 === 0 ? ['ours', 'baseline'] : ['baseline', 'ours']) : ['ours'];
    const order = round % 2 === 0 ? [...pair, 'peer'] : ['peer', ...pair];
    // Each participant of the round: its database, how it starts, and where its runs go.
    const who = {
      ours: { db: dbName, runs: ours, start: () => startOurs(dbName, scenario) },
      baseline: {
        db: baseDb,
        runs: baseline,
        start: () => startOurs(baseDb, scenario, BASELINE_MAIN, 'baseline', BASELINE_ENV),
      },
      peer: { db: peerDb, runs: peer, start: () => startPeer(scenario.peer, peerDb) },
    };
    if (CONCURRENT) {
      // Both builds at once, each with its own CLIENTS clients and database: the same moment of the machine.
      // Which one starts, and has its clients set up, first alternates by round (`pair`), so a build never
      // always gets the head start.
      const started = new Map();
      try {
        for (const name of pair) started.set(name, await who[name].start());
        const runs = await Promise.all(
          pair.map((name) => measure(scenario.setup, started.get(name), who[name].db, scenario.op)),
        );
        for (const [name, label] of [
          ['ours', 'this server (side by side)'],
          ['baseline', 'baseline (side by side)'],
        ]) {
          const r = runs[pair.indexOf(name)];
          who[name].runs.push(r);
          // One polls counter serves both clients' loops, so neither run's polls per lifecycle is known.
          logRun(scenario, round, label, { ...r, pollsPerOp: 0 });
        }
      } finally {
        await Promise.all([...started.values()].map(stop));
      }
    }
    for (const name of order) {
      if (CONCURRENT && name !== 'peer') continue;
      if (name === 'peer' && (!scenario.peer || process.env.BENCH_PEERS === 'false')) continue;
      const server = await who[name].start();
      try {
        const op = name === 'peer' && scenario.peerOp ? scenario.peerOp : scenario.op;
        const setup = name === 'peer' && scenario.peerSetup ? scenario.peerSetup : scenario.setup;
        const r = await measure(setup, server, who[name].db, op);
        who[name].runs.push(r);
        logRun(scenario, round, server.label, r);
      } finally {
        await stop(server);
      }
    }
    await admin(serverUrl, `DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
    if (peerDb) await admin(serverUrl, `DROP DATABASE IF EXISTS "${peerDb}" WITH (FORCE)`);
    if (baseDb) await admin(serverUrl, `DROP DATABASE IF EXISTS "${baseDb}" WITH (FORCE)`);
  }
  results.push({
    scenario,
    ours: mergeRuns(ours),
    peer: peer.length ? mergeRuns(peer) : undefined,
    paired: baseline.length ? pairedRatio(ours, baseline) : undefined,
  });
}
agent.destroy();

const peerName = (p) =>
  p ? (p[0] === 'sdk' ? `SDK 1.x ${p[1]}` : p[0] === 'pg-boss' ? 'pg-boss 10' : '@rekog/mcp-nest 2.x') : '—';
const f0 = (n) => n.toFixed(0);
const f2 = (n) => (Number.isFinite(n) ? n.toFixed(2) : '—');
const lines = [
  `| scenario | this server: ops/s (runs), p99, CPU ms/op server + pg | peer | peer: ops/s (runs), p99, CPU ms/op | ratio |`,
  `|---|---|---|---|---|`,
];
for (const { scenario, ours, peer } of results) {
  const mine = `${ours.rates.map(f0).join(' / ')}, p99 ${f2(ours.p99)} ms, ${f2(ours.cpuMs)} + ${f2(ours.pgCpuMs)}`;
  // A peer on PostgreSQL (pg-boss) has its backends' CPU too.
  const peerPg = scenario.peer?.[0] === 'pg-boss' ? ` + ${f2(peer?.pgCpuMs ?? NaN)}` : '';
  const theirs = peer
    ? `${peer.rates.map(f0).join(' / ')}, p99 ${f2(peer.p99)} ms, ${f2(peer.cpuMs)}${peerPg}`
    : '—';
  const ratio = peer ? `${(ours.rate / peer.rate).toFixed(2)}×` : '—';
  const errs = ours.errors || peer?.errors ? ` (errors: ${ours.errors}/${peer?.errors ?? 0})` : '';
  lines.push(
    `| ${scenario.name}: ${scenario.what} | ${mine} | ${peerName(scenario.peer)} | ${theirs} | ${ratio}${errs} |`,
  );
}
if (results.some((r) => r.paired)) {
  lines.push(
    '',
    `Paired with the baseline build (${BASELINE_LABEL}, ${CONCURRENT ? 'both running at the same time' : 'back to back, order alternating'}), this server's rate over the baseline's per round:`,
    '',
    '| scenario | baseline: ops/s (runs), CPU ms/op server + pg | rate ratio per round | rate: geometric mean [95 % CI] | CPU per op (server + pg), this over baseline [95 % CI] |',
    '|---|---|---|---|---|',
  );
  for (const { scenario, paired: p } of results) {
    if (!p) continue;
    const b = p.baseline;
    lines.push(
      `| ${scenario.name} | ${b.rates.map(f0).join(' / ')}, ${f2(b.cpuMs)} + ${f2(b.pgCpuMs)} | ` +
        `${p.ratios.map(f2).join(', ')} | ${f2(p.mean)}× [${f2(p.low)}, ${f2(p.high)}] | ` +
        `${f2(p.cpu.mean)}× [${f2(p.cpu.low)}, ${f2(p.cpu.high)}] |`,
    );
  }
}
const machine =
  `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ` +
  `Node ${process.version}, ${CLIENTS} closed-loop clients, ${SECONDS} s windows after ${WARMUP_SECONDS} s warm-up, ` +
  `${ROUNDS} interleaved rounds` +
  (SPLIT && SCENARIOS.some((sc) => sc.name === 'durable-lifecycle')
    ? '; durable-lifecycle: web + worker instances'
    : '');
const report = `# bench:compare ${new Date().toISOString()}\n\n${machine}\n\n${lines.join('\n')}\n`;
console.log(`\n${report}`);
mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
const file = join(ROOT, 'bench', 'results', `compare-${new Date().toISOString().replace(/[:.]/g, '-')}.md`);
writeFileSync(file, report);
console.log(`written to bench/results/${file.split('/').pop()}`);
