import type { INestApplication } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { PgBusService } from '../../src/bus/pg-bus.service.js';
import { TaskToolRunner } from '../../src/tasks/mcp/task-tool-runner.service.js';
import { principalIdFor } from '../../src/principals/principals.service.js';
import { QuotaService } from '../../src/quotas/quota.service.js';
import { MethodRegistry } from '../../src/protocol/method-registry.js';
import { LifecycleService } from '../../src/lifecycle/lifecycle.service.js';
import { TASK_CHANNEL } from '../../src/tasks/store/task-change-publisher.js';
import { TasksService } from '../../src/tasks/registry/tasks.service.js';
import { openStream, responseOf } from '../support/mcp-http.js';
import {
  asUser,
  freshUser,
  LegacyClient,
  listenInit,
  modern,
  PROXY_SECRET,
  rpcId,
  waitFor,
} from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const ELICIT = { elicitation: {} };

/**
 * Junk requests must not grow the server's memory (issue 10): nothing is keyed by a client-chosen id before
 * the ownership check, and a subscriptions/listen leaves nothing behind once its client is gone, whenever
 * it leaves.
 */
describe('memory that junk requests cannot grow', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    db = await createTestDatabase('bounded_mem');
    app = await createTestApp(db.url, {
      MCP_CONFORMANCE_FIXTURES: 'true',
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      TASK_INLINE_WINDOW_MS: '50',
    });
    url = await loopbackUrl(app, '/mcp');
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const ok = async (user: string, method: string, params: Record<string, unknown>, caps = {}) => {
    const answer = await modern(url, method, params, { headers: asUser(user), caps });
    const response = responseOf(answer);
    if (!response || !('result' in response)) throw new Error(`${method}: ${answer.status} ${answer.text}`);
    return response.result;
  };

  it('tasks/update with unknown (6 KB) task ids remembers nothing', async () => {
    const user = freshUser();
    const executor = app.get(TaskToolRunner);
    for (let i = 0; i < 200; i++) {
      // 6 KB ids half the time, well-formed but unknown ones otherwise: neither is anybody's task.
      const taskId =
        i % 2 === 0 ? randomBytes(3 * 1024).toString('hex') : randomBytes(18).toString('base64url');
      const answer = await modern(
        url,
        'tasks/update',
        { taskId, inputResponses: { x: 1 } },
        { headers: asUser(user) },
      );
      expect(responseOf(answer)?.error).toEqual({ code: -32602, message: 'Task not found' });
    }
    expect(executor.pendingPrincipals).toBe(0);
  });

  it("another principal's tasks/update on a parked task is refused and leaves the owner's run alone", async () => {
    const alice = freshUser('alice');
    const bob = freshUser('bob');
    const executor = app.get(TaskToolRunner);
    const created = await ok(alice, 'tools/call', { name: 'multi_input', arguments: {} }, ELICIT);
    expect(created.resultType).toBe('task');
    const parked = await waitFor(
      () => ok(alice, 'tasks/get', { taskId: created.taskId }),
      (t) => t.status === 'input_required',
    );
    const answers: Record<string, unknown> = {};
    for (const key of Object.keys(parked.inputRequests)) {
      answers[key] = {
        action: 'accept',
        content: key.endsWith('first_name') ? { first_name: 'Ada' } : { last_name: 'Lovelace' },
      };
    }
    const foreign = await modern(
      url,
      'tasks/update',
      { taskId: created.taskId, inputResponses: answers },
      { headers: asUser(bob) },
    );
    expect(responseOf(foreign)?.error).toEqual({ code: -32602, message: 'Task not found' });
    expect(executor.pendingPrincipals).toBe(0);
    expect((await ok(alice, 'tasks/get', { taskId: created.taskId })).status).toBe('input_required');

    await ok(alice, 'tasks/update', { taskId: created.taskId, inputResponses: answers });
    const done = await waitFor(
      () => ok(alice, 'tasks/get', { taskId: created.taskId }),
      (t) => t.status === 'completed',
    );
    expect(JSON.stringify(done.result)).toContain('Ada');
    expect(executor.pendingPrincipals).toBe(0);
  });

  it('opened-and-dropped listens (100 KB bodies) leave no drain listener, bus handler or stream behind', async () => {
    const user = freshUser();
    const lifecycle = app.get(LifecycleService);
    const bus = app.get(PgBusService);
    const drainBefore = lifecycle.drainListenerCount;
    const busBefore = bus.handlerCount(TASK_CHANNEL);
    for (let i = 0; i < 60; i++) {
      const stream = await openStream(url, listenInit(user, { taskIds: [] }, { padding: 100 * 1024 }));
      const ack = await stream.next();
      expect(ack.json.method).toBe('notifications/subscriptions/acknowledged');
      stream.close();
    }
    await waitFor(
      async () => [lifecycle.drainListenerCount, bus.handlerCount(TASK_CHANNEL)],
      ([drain, handlers]) => drain === drainBefore && handlers === busBefore,
      { what: 'listen resources released' },
    );
  });

  it('a listen whose client leaves while a filter is still being set up releases what the filter set up', async () => {
    const user = freshUser();
    const lifecycle = app.get(LifecycleService);
    const bus = app.get(PgBusService);
    const tasks = app.get(TasksService);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let entered = 0;
    let aborted = 0;
    // A filter that subscribes to task changes (as the taskIds filter does) and then is slow to answer.
    app.get(MethodRegistry).registerListenFilter('slowGate', async (_filter, ctx) => {
      entered++;
      const off = tasks.onTaskChanged(() => undefined);
      ctx.signal.addEventListener(
        'abort',
        () => {
          aborted++;
          off();
        },
        { once: true },
      );
      await gate;
      return true;
    });
    const drainBefore = lifecycle.drainListenerCount;
    const busBefore = bus.handlerCount(TASK_CHANNEL);
    const controllers: AbortController[] = [];
    const pending: Promise<unknown>[] = [];
    for (let i = 0; i < 20; i++) {
      const c = new AbortController();
      controllers.push(c);
      pending.push(
        fetch(url, { ...listenInit(user, { slowGate: true }), signal: c.signal }).catch(() => null),
      );
    }
    await waitFor(
      async () => entered,
      (n) => n === 20,
      { what: 'filters entered' },
    );
    for (const c of controllers) c.abort();
    await Promise.all(pending);
    await waitFor(
      async () => aborted,
      (n) => n === 20,
      { what: 'filters told the client is gone' },
    );
    release();
    await new Promise((r) => setTimeout(r, 200));
    expect(lifecycle.drainListenerCount).toBe(drainBefore);
    expect(bus.handlerCount(TASK_CHANNEL)).toBe(busBefore);
  });

  it('a legacy tasks/result abandoned by its client stops waiting (the task itself goes on)', async () => {
    const user = freshUser();
    const quotas = app.get(QuotaService);
    const principalId = principalIdFor({ provider: 'proxy', subject: user });
    const c = await LegacyClient.open(url, {}, asUser(user));
    const task = await c.createTask('slow_compute', { seconds: 30 });
    const controllers: AbortController[] = [];
    const pending: Promise<unknown>[] = [];
    for (let i = 0; i < 20; i++) {
      const ac = new AbortController();
      controllers.push(ac);
      pending.push(
        fetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            ...c.headers(),
          },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: rpcId(),
            method: 'tasks/result',
            params: { taskId: task.taskId },
          }),
          signal: ac.signal,
        }).catch(() => null),
      );
    }
    await waitFor(
      async () => quotas.holding('result_waiters', principalId),
      (n) => n === 20,
      { what: 'twenty waiters' },
    );
    for (const ac of controllers) ac.abort();
    await Promise.all(pending);
    await waitFor(
      async () => quotas.holding('result_waiters', principalId),
      (n) => n === 0,
      { what: 'abandoned waiters released' },
    );
    expect((await c.result('tasks/get', { taskId: task.taskId })).status).toBe('working');
    await c.result('tasks/cancel', { taskId: task.taskId });
  });
});
