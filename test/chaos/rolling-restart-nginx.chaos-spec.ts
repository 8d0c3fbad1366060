import { setTimeout as sleep } from 'node:timers/promises';
import { startNginx, type Nginx } from '../support/nginx.js';
import { startServer, type ServerProcess } from '../support/server-process.js';
import { PROXY_SECRET } from '../support/tasks-e2e.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { chaosEnv, figure, pollUntil, readiness, stopAll, tail } from './support/chaos-kit.js';
import { describeFailures, EraLoad } from './support/era-load.js';
import { freePort } from '../support/local-host.js';

const SCENARIO = 'rolling restart behind nginx';
const INSTANCES = 3;
const CLIENTS_PER_ERA = 4;
/** Sessions that only hold a GET stream: each drain ends theirs, and nginx reuses those connections. */
const STREAM_HOLDERS = 4;

/**
 * A deploy as an operator runs it behind the shipped nginx config (test/support/nginx.ts renders
 * deploy/nginx: mcp-proxy.conf and the upstream keep-alive settings of nginx.conf): three instances, each in
 * turn sent SIGTERM, awaited and started again on its port before the next, under steady load from both eras
 * through nginx. With the default drain delay, no client request may fail and no task may be lost.
 */
describe('chaos: rolling restart of three instances behind nginx', () => {
  let db: TestDatabase;
  let nginx: Nginx;
  const ports: number[] = [];
  const servers: ServerProcess[] = [];
  const retired: ServerProcess[] = [];
  let env: Record<string, string>;

  beforeAll(async () => {
    db = await createTestDatabase('chaos_rolling');
    env = chaosEnv(db.url, {
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      // Every request reaches the instances from nginx's one address.
      RATE_LIMIT_ADDRESS_RPS: '0',
    });
    for (let i = 0; i < INSTANCES; i++) {
      ports.push(await freePort());
      servers.push(await startServer({ ...env, PORT: String(ports[i]) }));
    }
    nginx = await startNginx(ports.map((p) => `127.0.0.1:${p}`));
  });
  afterAll(async () => {
    await nginx?.stop();
    await stopAll([...retired, ...servers], 'rolling');
    await db?.drop();
  });

  it('loses no client request and no task while each instance in turn drains and comes back', async () => {
    const load = new EraLoad(`${nginx.baseUrl}/mcp`, { taskSeconds: 0.5, pauseMs: 20 });
    load.start(CLIENTS_PER_ERA, CLIENTS_PER_ERA, STREAM_HOLDERS);
    await sleep(2000);
    const exits: string[] = [];
    const drains: number[] = [];
    const started = Date.now();
    for (let i = 0; i < INSTANCES; i++) {
      const leaving = servers[i];
      const signalled = Date.now();
      leaving.proc.kill('SIGTERM');
      const code = await Promise.race([leaving.exited, sleep(30000, 'timeout', { ref: false })]);
      drains.push(Date.now() - signalled);
      exits.push(String(code));
      if (code !== 0) throw new Error(`instance ${i} exit ${code}:\n${tail(leaving)}`);
      retired.push(leaving);
      servers[i] = await startServer({ ...env, PORT: String(ports[i]) });
      const ready = await pollUntil(
        () => readiness(servers[i]),
        (s) => s === 200,
        15000,
      );
      if (ready !== 200) throw new Error(`instance ${i} not ready again:\n${tail(servers[i])}`);
      await sleep(1000);
    }
    await sleep(1000);
    const restartMs = Date.now() - started;
    const figures = await load.stop();
    const log = await nginx.upstreams();
    const mcp = log.filter((e) => e.uri.startsWith('/mcp'));
    const clientErrors = mcp.filter((e) => e.status >= 500);
    // A connection the instance reset or closed under a request nginx had sent on it: a GET is retried
    // elsewhere, a POST (not idempotent) becomes a 502.
    const cut = (await nginx.errorLog())
      .split('\n')
      .filter((l) => /reset by peer|prematurely closed/.test(l));

    figure(SCENARIO, 'instances', INSTANCES);
    figure(
      SCENARIO,
      'clients',
      `${CLIENTS_PER_ERA} per era (2025-11-25 sessions, 2026-07-28 stateless), ${STREAM_HOLDERS} GET stream holders`,
    );
    figure(SCENARIO, 'drain and exit per instance', drains.join(', '), 'ms');
    figure(SCENARIO, 'exit codes', exits.join(', '));
    figure(SCENARIO, 'rolling restart duration', restartMs, 'ms');
    figure(SCENARIO, 'client requests', figures.requests);
    figure(SCENARIO, 'GET streams opened (held, reopened when a drain ended them)', figures.streamsOpened);
    figure(SCENARIO, 'failed client requests', figures.failures.length);
    figure(SCENARIO, '5xx answers nginx gave clients', clientErrors.length);
    figure(SCENARIO, 'kept connections cut under a request', cut.length);
    figure(SCENARIO, 'nginx retries on another instance', mcp.filter((e) => e.upstream.includes(',')).length);
    figure(SCENARIO, 'tasks completed', figures.tasksCompleted);
    figure(SCENARIO, 'failed tasks', figures.failedTasks.length);
    figure(SCENARIO, 'tasks/result waits ended by a drain and repeated', figures.resultRetries);

    const failures = [...figures.failures, ...figures.failedTasks];
    // A cut connection is a request at risk even when nginx could retry it (a GET): none may happen.
    if (failures.length > 0 || clientErrors.length > 0 || cut.length > 0) {
      // What nginx says of each (a reset or closed connection, no live upstream); refused connects are
      // retried on another instance and left out.
      const why = (await nginx.errorLog())
        .split('\n')
        .filter((l) => /upstream|no live/.test(l) && !/Connection refused/.test(l));
      throw new Error(
        `${failures.length > 0 ? describeFailures(failures) : 'no client failure'}\n` +
          `5xx answers from nginx: ${JSON.stringify(clientErrors)}\nnginx error log:\n${why.join('\n')}`,
      );
    }
    expect(figures.tasksCompleted).toBeGreaterThan(0);
  });
});
