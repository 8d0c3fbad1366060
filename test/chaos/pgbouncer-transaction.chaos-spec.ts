import { DataSource } from 'typeorm';
import { runMigrationsLocked } from '../../src/database/migrations-runner.js';
import { buildDataSourceOptions } from '../../src/database/typeorm-options.js';
import { responseOf } from '../support/mcp-http.js';
import { startPgBouncer, type PgBouncer } from '../support/pgbouncer.js';
import { startServer, type ServerProcess } from '../support/server-process.js';
import { asUser, freshUser, LegacyClient, modern, PROXY_SECRET, waitFor } from '../support/tasks-e2e.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { describeFailures, EraLoad } from './support/era-load.js';
import { chaosEnv, figure, stopAll, tail } from './support/chaos-kit.js';
import { SCHEMA } from '../../src/schema.js';

const SCENARIO = 'PgBouncer transaction pooling';
const CLIENTS = 50;

/**
 * The server behind the PgBouncer an operator gets from the distribution (Debian 12: 1.18, which cannot
 * track prepared statements at all), in transaction mode, with no setting of ours for it: the pool must
 * find out by itself that named statements do not survive there. LISTEN goes past the pooler
 * (DATABASE_LISTEN_URL), migrations run once with a direct connection, as docs/operations.md says.
 */
describe('chaos: behind PgBouncer in transaction mode', () => {
  let db: TestDatabase;
  let bouncer: PgBouncer;
  const servers: ServerProcess[] = [];

  function env(extra: Record<string, string> = {}): Record<string, string> {
    return chaosEnv(bouncer.url, {
      DATABASE_LISTEN_URL: db.url,
      DB_MIGRATIONS_RUN: 'false',
      DB_POOL_MAX: '10',
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      RATE_LIMIT_ADDRESS_RPS: '0',
      ...extra,
    });
  }

  beforeAll(async () => {
    db = await createTestDatabase('chaos_pgbouncer');
    const direct = new DataSource(buildDataSourceOptions({ url: db.url, schema: SCHEMA }));
    await direct.initialize();
    await runMigrationsLocked(direct);
    await direct.destroy();
    bouncer = await startPgBouncer(db.url, { poolMode: 'transaction', poolSize: 8 });
  });
  afterAll(async () => {
    await stopAll(servers, 'pgbouncer');
    await bouncer?.stop();
    await db?.drop();
  });

  it('runs the task lifecycle of both eras and 50 concurrent clients without an error, with no setting', async () => {
    const server = await startServer(env());
    servers.push(server);
    const url = `${server.baseUrl}/mcp`;
    figure(
      SCENARIO,
      'pooler',
      `${bouncer.version}, pool_mode=transaction, max_prepared_statements unsupported`,
    );
    const mode = /prepared statements: (\w+) \(auto: ([^)]*)\)/.exec(server.output());
    figure(SCENARIO, 'statement mode found at boot', mode ? `${mode[1]} (${mode[2]})` : 'none logged');

    // One client alone: its very first tasks/get was the request that failed before.
    const legacy = await LegacyClient.open(url, {}, asUser(freshUser('pgb')));
    const task = await legacy.createTask('slow_compute', { seconds: 0.2, label: 'first' });
    expect((await legacy.result('tasks/get', { taskId: task.taskId })).taskId).toBe(task.taskId);
    expect((await legacy.result('tasks/result', { taskId: task.taskId })).content).toEqual([
      { type: 'text', text: 'Computed first after 0.2 s' },
    ]);
    const headers = asUser(freshUser('pgb'));
    const created = responseOf(
      await modern(
        url,
        'tools/call',
        { name: 'slow_compute', arguments: { seconds: 0.5, label: 'm' } },
        { headers },
      ),
    ).result;
    expect(created.resultType).toBe('task');
    const done = await waitFor(
      async () => responseOf(await modern(url, 'tasks/get', { taskId: created.taskId }, { headers })).result,
      (t) => t.status === 'completed',
      { what: 'the 2026-07-28 task to complete', intervalMs: 100 },
    );
    expect(JSON.stringify(done.result)).toContain('Computed m after 0.5 s');

    // 50 clients at once, half of each era, three full lifecycles each.
    const load = new EraLoad(url, { taskSeconds: 0.3, rounds: 3 });
    const started = Date.now();
    load.start(CLIENTS / 2, CLIENTS / 2);
    const figures = await load.done();
    figure(SCENARIO, 'concurrent clients', CLIENTS);
    figure(SCENARIO, 'requests', figures.requests);
    figure(SCENARIO, 'failed requests', figures.failures.length);
    figure(SCENARIO, 'tasks completed', figures.tasksCompleted);
    figure(SCENARIO, 'failed tasks', figures.failedTasks.length);
    figure(SCENARIO, 'load duration', Date.now() - started, 'ms');
    if (figures.failures.length || figures.failedTasks.length) {
      throw new Error(
        `${describeFailures([...figures.failures, ...figures.failedTasks])}\nserver log:\n${tail(server)}`,
      );
    }
    expect(figures.tasksCompleted).toBe(CLIENTS * 3);
    expect(mode?.[1]).toBe('unnamed');
    expect(server.output()).not.toMatch(/prepared statement .* (does not exist|already exists)/);
  });

  it('forced named statements behind it: 503 with Retry-After and readiness down, never -32603 in a 200', async () => {
    const server = await startServer(env({ DB_PREPARED_STATEMENTS: 'named', SESSION_CACHE_MAX: '0' }));
    servers.push(server);
    const url = `${server.baseUrl}/mcp`;
    expect(server.output()).toContain('prepared statements: named (DB_PREPARED_STATEMENTS=named)');
    // Opening a session reads it back too: a lost statement may refuse that as well, so open until it works.
    const openOne = async (): Promise<LegacyClient> => {
      for (let i = 0; ; i++) {
        try {
          return await LegacyClient.open(url, {}, asUser(freshUser('pgbn')));
        } catch (err) {
          if (i >= 20) throw err;
        }
      }
    };
    const clients = await Promise.all(Array.from({ length: 10 }, openOne));
    const answers = await Promise.all(
      clients.flatMap((c) => Array.from({ length: 5 }, () => c.send('ping', {}).catch(() => null))),
    );
    const ready = await fetch(`${server.baseUrl}/health/ready`);
    const body = (await ready.json()) as { checks: Record<string, unknown> };
    const unavailable = answers.filter((a) => a?.status === 503);
    const internal = answers.filter((a) => a?.status === 200 && responseOf(a)?.error?.code === -32603);
    figure(
      SCENARIO,
      'forced named: answers 503 / internal error in a 200 / of',
      `${unavailable.length} / ${internal.length} / ${answers.length}`,
    );
    figure(SCENARIO, 'forced named: readiness right after', ready.status);
    expect(internal).toEqual([]);
    expect(unavailable.length).toBeGreaterThan(0);
    for (const a of unavailable) expect(a?.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(ready.status).toBe(503);
    expect(body.checks.database_faults).toEqual({ status: 'down', reason: 'retryable faults' });
  });
});
