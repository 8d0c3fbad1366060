// Peer for bench/compare.mjs (scenario durable-lifecycle): pg-boss 10 (the last major that runs on Node 20)
// on its own scratch database of the same PostgreSQL server, behind the smallest HTTP front that lets the same
// load generator drive it: send → work → complete, then a read of the job.
//
//   DATABASE_URL=postgres://…/<scratch db> node bench/peers/pg-boss-server.mjs
//     (prints "listening on http://127.0.0.1:PORT/jobs")
//
//   POST /jobs        {text}  → boss.send('bench', {text}) → {id}; wakes the work loops
//   GET  /jobs/<id>           → waits (≤ 100 ms) until this process completed the job, then boss.getJobById → {state, output}
//
// The work loops are what pg-boss's own work() runs (fetch a batch with SKIP LOCKED, run the handler, complete
// the batch), except that they are woken by each send in this process instead of sleeping out work()'s polling
// interval (at least 0.5 s in pg-boss 10): the best pg-boss can do for latency, so the comparison is with
// pg-boss at its fastest, not with its default polling. BENCH_PGBOSS_WORKERS (default 4) loops, each fetching
// up to BENCH_PGBOSS_BATCH (default 8) jobs. A GET waits for the local completion the way this server's
// tasks/get waits for its local outcome commit, so both answer "completed" at the first read.
import http from 'node:http';
import PgBoss from 'pg-boss';

const QUEUE = 'bench';
const WORKERS = Number(process.env.BENCH_PGBOSS_WORKERS ?? 4);
const BATCH = Number(process.env.BENCH_PGBOSS_BATCH ?? 8);

const boss = new PgBoss({
  connectionString: process.env.DATABASE_URL,
  schema: 'pgboss',
  max: 20, // the same pool size this server gets (DB_POOL_MAX)
  // Maintenance (expiry, archiving) runs on its own timer; the bench measures the job path.
  supervise: true,
  schedule: false,
});
boss.on('error', (err) => console.error(`pg-boss: ${err.message}`));
await boss.start();
await boss.createQueue(QUEUE);

/** Jobs this process completed and not yet read (id → true), and reads waiting for one (id → resolve). */
const completed = new Map();
const waiters = new Map();
function markCompleted(id) {
  completed.set(id, true);
  const w = waiters.get(id);
  if (w) {
    waiters.delete(id);
    w();
  }
}

// Loops that found the queue empty sleep until a send wakes one (or pg-boss's shortest polling interval ends,
// a safety net); a send that finds none asleep is remembered, so a loop about to sleep fetches again instead.
const sleepers = [];
let missedWakes = 0;
function wakeOne() {
  const s = sleepers.pop();
  if (s) s();
  else missedWakes++;
}
async function workLoop() {
  for (;;) {
    const jobs = await boss.fetch(QUEUE, { batchSize: BATCH });
    if (jobs.length === 0) {
      if (missedWakes > 0) {
        missedWakes = 0;
        continue;
      }
      await new Promise((r) => {
        const sleeper = () => {
          clearTimeout(timer);
          r();
        };
        const timer = setTimeout(() => {
          sleepers.splice(sleepers.indexOf(sleeper), 1);
          r();
        }, 500);
        sleepers.push(sleeper);
      });
      continue;
    }
    // The handler: echo the text (the same no-work tool as the MCP scenarios).
    const outputs = jobs.map((j) => ({ text: j.data?.text }));
    await boss.complete(
      QUEUE,
      jobs.map((j) => j.id),
      jobs.length === 1 ? outputs[0] : undefined,
    );
    for (const j of jobs) markCompleted(j.id);
  }
}
for (let i = 0; i < WORKERS; i++) {
  void (async () => {
    for (;;) {
      try {
        await workLoop();
      } catch (err) {
        console.error(`work loop: ${err.message}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  })();
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString()));
    req.on('error', reject);
  });
}

function send(res, status, body) {
  const data = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
  res.end(data);
}

const server = http.createServer(async (req, res) => {
  try {
    if (req.method === 'POST' && req.url === '/jobs') {
      const { text } = JSON.parse(await readBody(req));
      const id = await boss.send(QUEUE, { text });
      wakeOne();
      return send(res, 200, { id });
    }
    const m = /^\/jobs\/([0-9a-f-]{36})$/.exec(req.url ?? '');
    if (req.method === 'GET' && m) {
      const id = m[1];
      if (!completed.has(id)) {
        await Promise.race([new Promise((r) => waiters.set(id, r)), new Promise((r) => setTimeout(r, 100))]);
        waiters.delete(id);
      }
      completed.delete(id);
      const job = await boss.getJobById(QUEUE, id);
      if (!job) return send(res, 404, { error: 'no such job' });
      return send(res, 200, { state: job.state, output: job.output });
    }
    send(res, 404, { error: 'not found' });
  } catch (err) {
    send(res, 500, { error: err.message });
  }
});

server.listen(0, '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}/jobs`);
});

process.on('SIGTERM', async () => {
  server.close();
  await boss.stop({ graceful: false, wait: false }).catch(() => undefined);
  process.exit(0);
});
