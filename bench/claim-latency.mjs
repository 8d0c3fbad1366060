// Claim latency of the task queue (issue 22): from "claimable" to "running" with free capacity. Not run in CI.
//
//   npm run build && TEST_DATABASE_URL=postgres://user@127.0.0.1:5432/postgres node bench/claim-latency.mjs [N]
//
// Two instances on one scratch database: W (INSTANCE_ROLE=web) takes the calls and queues every task, K
// (INSTANCE_ROLE=worker, TASK_WORKER_CONCURRENCY 16) claims and runs them. N tasks (default 500) are created
// on W as 2025-11-25 echo_task task handles, PARALLEL at a time, so K always has free slots.
//
// What is timed, on one LISTEN connection of this process (one clock, the same delivery path the claimers use):
//   claimable  the arrival of the task's mcp_task_queued notice, which PostgreSQL sends at the creation's COMMIT
//   running    the arrival of the claim's mcp_task_changed notice (generation 2, from K), sent at the claim's
//              COMMIT; K starts the run as that COMMIT returns, in the same turn of its event loop
// Latency = running − claimable. It includes the notice's delivery to K, K's wake, the claim statement and its
// commit. The safety poll (TASK_CLAIM_POLL_MS, 2 s) plays no part in a p99 under 100 ms. Target: p99 < 100 ms.
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { admin, legacyRpc, openLegacySession, pct, spawnServer } from './bench-support.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const N = Math.max(20, Number(process.argv[2] ?? 500));
const PARALLEL = 4;

const serverUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
if (!serverUrl) {
  console.error('Set TEST_DATABASE_URL (a PostgreSQL server on which a scratch database is created).');
  process.exit(2);
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });

async function stop(server) {
  if (server.proc.exitCode !== null) return;
  await new Promise((resolve) => {
    server.proc.once('exit', resolve);
    server.proc.kill('SIGTERM');
    setTimeout(() => server.proc.kill('SIGKILL'), 15000).unref();
  });
}

async function main() {
  const dbName = `bench_claim_${randomBytes(4).toString('hex')}`;
  await admin(serverUrl, `CREATE DATABASE "${dbName}"`);
  const u = new URL(serverUrl);
  u.pathname = `/${dbName}`;
  const env = {
    PORT: '0',
    DATABASE_URL: u.toString(),
    MCP_BENCH_TOOLS: 'true',
    LOG_LEVEL: 'log',
    RATE_LIMIT_PRINCIPAL_RPS: '0',
    RATE_LIMIT_ADDRESS_RPS: '0',
    TASK_MAX_PER_OWNER: '100000',
  };
  const entry = join(ROOT, 'dist', 'src', 'main.js');
  const web = await spawnServer([entry], { ...env, INSTANCE_ROLE: 'web' }, { label: 'web', cwd: ROOT });
  const worker = await spawnServer([entry], { ...env, INSTANCE_ROLE: 'worker' }, { label: 'worker', cwd: ROOT });
  const listener = new pg.Client({ connectionString: u.toString() });
  let text;
  try {
    await listener.connect();
    const queuedAt = new Map();
    const latencies = [];
    const done = new Map();
    listener.on('notification', (msg) => {
      const at = performance.now();
      const p = JSON.parse(msg.payload ?? '{}');
      if (msg.channel === 'mcp_task_queued') {
        if (!queuedAt.has(p.taskId)) queuedAt.set(p.taskId, at);
        return;
      }
      // The claim: the first change of the task at generation 2, still working.
      if (p.generation !== 2 || p.status !== 'working' || done.has(p.taskId)) return;
      const from = queuedAt.get(p.taskId);
      if (from === undefined) return;
      latencies.push(at - from);
      done.set(p.taskId, true);
    });
    await listener.query('LISTEN mcp_task_queued');
    await listener.query('LISTEN mcp_task_changed');
    const sid = await openLegacySession(agent, web.url, 'claim-latency');
    // Warm-up: connections, prepared statements, JIT.
    for (let i = 0; i < 20; i++) {
      await legacyRpc(agent, web.url, sid, 'tools/call', { name: 'echo_task', arguments: { text: 'w' }, task: {} });
    }
    await new Promise((r) => setTimeout(r, 500));
    latencies.length = 0;
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: PARALLEL }, async () => {
        while (next < N) {
          next++;
          await legacyRpc(agent, web.url, sid, 'tools/call', { name: 'echo_task', arguments: { text: 'x' }, task: {} });
        }
      }),
    );
    const deadline = performance.now() + 10000;
    while (latencies.length < N && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const seconds = (performance.now() - started) / 1000;
    const ms = [...latencies].sort((a, b) => a - b);
    const f = (v) => `${v.toFixed(1)} ms`;
    text = [
      `# bench/claim-latency.mjs ${new Date().toISOString()}`,
      '',
      `${os.cpus().length} × ${os.cpus()[0].model}, Node ${process.version}; a web instance queues, a worker ` +
        `(TASK_WORKER_CONCURRENCY 16) claims, one database; ${PARALLEL} creations at a time, ${N} tasks in ` +
        `${seconds.toFixed(1)} s.`,
      'Latency: arrival of the claim\'s change notice − arrival of the queued notice (both at COMMIT), on one ' +
        'listener. Target: p99 < 100 ms.',
      '',
      '| path | tasks | p50 | p95 | p99 | max |',
      '|---|---|---|---|---|---|',
      `| queued on web → claimed and started on worker | ${ms.length} | ${f(pct(ms, 50))} | ${f(pct(ms, 95))} | ` +
        `${f(pct(ms, 99))} | ${f(ms[ms.length - 1])} |`,
      '',
    ].join('\n');
    if (ms.length < N) text += `\n${N - ms.length} task(s) were not seen claimed within 10 s.\n`;
  } finally {
    await listener.end().catch(() => undefined);
    await Promise.all([stop(web), stop(worker)]);
    await admin(serverUrl, `DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`).catch(() => undefined);
  }
  console.log(text);
  mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
  const file = join(ROOT, 'bench', 'results', `claim-latency-${new Date().toISOString().replace(/[:.]/g, '-')}.md`);
  writeFileSync(file, text);
  console.log(`written to ${file}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
