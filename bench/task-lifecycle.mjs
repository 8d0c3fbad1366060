// Task registry benchmark against a real PostgreSQL: create → complete → get → result throughput and latency,
// and tasks/get-equivalent read latency under concurrent load. Not run in CI.
//
//   npm run build
//   DATABASE_URL=postgres://user@host:5432/postgres node bench/task-lifecycle.mjs [tasks] [concurrency]
//
// DB_PREPARED_STATEMENTS=named|unnamed compares the two statement modes (unnamed: what a transaction-mode
// pooler without prepared statement tracking gets); FINISHED_TASK_CACHE_MAX=0 makes every read a query.
//
// A scratch database is created next to the one named in DATABASE_URL and dropped afterwards.
import { NestFactory } from '@nestjs/core';
import { randomBytes } from 'node:crypto';
import { AppModule } from '../dist/src/app.module.js';
import { loadConfig } from '../dist/src/app.config.js';
import { TaskCreationService } from '../dist/src/tasks/execution/task-creation.service.js';
import { TasksService } from '../dist/src/tasks/registry/tasks.service.js';
import { admin, summary } from './bench-support.mjs';

const TASKS = Number(process.argv[2] ?? 2000);
const CONCURRENCY = Number(process.argv[3] ?? 16);
const READ_SECONDS = 5;

const base = process.env.DATABASE_URL;
if (!base) throw new Error('set DATABASE_URL to a PostgreSQL server the benchmark may create a database on');

async function pool(n, concurrency, fn) {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

const name = `bench_tasks_${randomBytes(4).toString('hex')}`;
await admin(base, `CREATE DATABASE "${name}"`);
const url = new URL(base);
url.pathname = `/${name}`;
const config = loadConfig({
  DATABASE_URL: url.toString(),
  LOG_LEVEL: 'warn',
  JANITOR_ENABLED: 'false',
  TASK_MAX_PER_OWNER: '1000000',
  TASK_MAX_TOTAL: '100000000',
  DB_POOL_MAX: String(Math.max(10, CONCURRENCY + 4)),
  DB_PREPARED_STATEMENTS: process.env.DB_PREPARED_STATEMENTS ?? 'auto',
  ...(process.env.FINISHED_TASK_CACHE_MAX
    ? { FINISHED_TASK_CACHE_MAX: process.env.FINISHED_TASK_CACHE_MAX }
    : {}),
});
// The work completes at once: what is measured is the registry, not a tool.
const taskWork = { execute: async () => ({ kind: 'completed', result: { content: [] } }) };
const app = await NestFactory.createApplicationContext(AppModule.forRoot(config, { taskWork }), {
  logger: ['error', 'warn'],
});
await app.init();
try {
  const tasks = app.get(TasksService);
  const creation = app.get(TaskCreationService);

  const owners = Array.from({ length: CONCURRENCY }, (_, i) => `bench-owner-${i}`);
  const lifecycle = [];
  const created = [];
  const t0 = performance.now();
  await pool(TASKS, CONCURRENCY, async (i) => {
    const owner = owners[i % owners.length];
    const s = performance.now();
    const { task: t } = await creation.create({
      ownerId: owner,
      era: 'legacy',
      toolName: 'bench',
      requestParams: {},
    });
    await tasks.get(owner, t.id);
    const r = await tasks.waitForTerminal(owner, t.id, { timeoutMs: 30000 });
    if (r.kind !== 'terminal' || r.task.status !== 'completed')
      throw new Error(`task ${t.id} ended ${r.kind}`);
    lifecycle.push(performance.now() - s);
    created.push([owner, t.id]);
  });
  const elapsed = (performance.now() - t0) / 1000;
  console.log(`lifecycle create → complete → get → result: ${TASKS} tasks, concurrency ${CONCURRENCY}`);
  console.log(`  throughput ${(TASKS / elapsed).toFixed(0)} tasks/s (${elapsed.toFixed(2)} s)`);
  console.log(`  ${summary('per task', lifecycle)}`);

  const reads = [];
  const stop = performance.now() + READ_SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, w) => {
      let i = w;
      while (performance.now() < stop) {
        const [owner, id] = created[i++ % created.length];
        const s = performance.now();
        await tasks.get(owner, id);
        reads.push(performance.now() - s);
      }
    }),
  );
  console.log(`tasks/get under load: ${CONCURRENCY} concurrent readers for ${READ_SECONDS} s`);
  console.log(`  ${(reads.length / READ_SECONDS).toFixed(0)} reads/s`);
  console.log(`  ${summary('per read', reads)}`);
} finally {
  await app.close();
  await admin(base, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
}
