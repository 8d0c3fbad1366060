import type { INestApplication } from '@nestjs/common';
import { PgBusService } from '../../src/bus/pg-bus.service.js';
import { MODERN, openStream, responseOf, type SseEvent } from '../support/mcp-http.js';
import { PgProxy } from '../support/pg-proxy.js';
import {
  asUser,
  EXT_CAPS,
  freshUser,
  LegacyClient,
  modern,
  nextMatching,
  PROXY_SECRET,
  rpcId,
  waitFor,
} from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

type Stream = Awaited<ReturnType<typeof openStream>>;

/**
 * Issue #9, defect 3: a state change committed while an instance's LISTEN connection is down is still
 * announced once it is back. Instance A reaches PostgreSQL through a proxy, so the test can end its
 * connections (pg_terminate_backend, as a failover does) and keep its listener from reconnecting until a
 * cancel has committed: the NOTIFY of that cancel is certainly lost. B connects directly.
 */
describe('notifications survive a lost LISTEN connection (real HTTP, real PostgreSQL)', () => {
  let db: TestDatabase;
  let proxy: PgProxy;
  let a: INestApplication;
  let b: INestApplication;
  let urlA: string;
  let urlB: string;
  let isListenerOfA: (app: string) => boolean;

  beforeAll(async () => {
    db = await createTestDatabase('notify_failover');
    proxy = await PgProxy.start(db.url);
    const env = {
      MCP_CONFORMANCE_FIXTURES: 'true',
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      TASK_INLINE_WINDOW_MS: '100',
      JANITOR_ENABLED: 'false',
    };
    a = await createTestApp(proxy.via(db.url), env);
    b = await createTestApp(db.url, env);
    urlA = await loopbackUrl(a, '/mcp');
    urlB = await loopbackUrl(b, '/mcp');
    const name = a.get(PgBusService).applicationName;
    isListenerOfA = (app) => app === name;
  });
  afterAll(async () => {
    proxy?.refuse(undefined);
    await a?.close();
    await b?.close();
    await proxy?.close();
    await db?.drop();
  });

  /**
   * Ends every connection A holds (its pool and its listener), found by this database's name and their
   * pids, and keeps A's listener from coming back until `restore()`.
   */
  async function failover(): Promise<{ restore(): Promise<void> }> {
    proxy.refuse(isListenerOfA);
    await withClient(db.url, async (c) => {
      // A's connections are the ones that come through the proxy: this database, those client ports.
      const { rows } = await c.query<{ pid: number }>(
        'SELECT pid FROM pg_stat_activity WHERE datname = $1 AND client_port = ANY($2::int[])',
        [db.name, proxy.upstreamPorts()],
      );
      expect(rows.length).toBeGreaterThan(0);
      for (const { pid } of rows) await c.query('SELECT pg_terminate_backend($1)', [pid]);
    });
    await waitFor(
      async () => a.get(PgBusService).isConnected,
      (up) => !up,
      { what: 'A’s listener to notice it was ended' },
    );
    return {
      restore: async () => {
        proxy.refuse(undefined);
        await waitFor(
          async () => a.get(PgBusService).isConnected,
          (up) => up,
          { what: 'A’s listener to reconnect' },
        );
      },
    };
  }

  /**
   * A JSON-RPC result, retrying a request that hit a pooled connection the failover had just ended (a 5xx
   * or an internal error: retrying such writes is not this suite's subject).
   */
  async function settle<T>(send: () => Promise<{ status: number; text: string }>): Promise<T> {
    for (let i = 0; ; i++) {
      const answer = await send();
      const response = responseOf(answer as never);
      if (response && 'result' in response) return response.result as T;
      const internal = answer.status >= 500 || response?.error?.code === -32603;
      if (!internal || i >= 5) throw new Error(`failed: ${answer.status} ${answer.text}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const isStatus = (taskId: string, status: string) => (ev: SseEvent) =>
    ev.json?.method === 'notifications/tasks/status' &&
    ev.json.params.taskId === taskId &&
    ev.json.params.status === status;

  /** Reads what else arrives for a while: nothing about `taskId` may come again. */
  async function rest(stream: Stream, ms = 1000): Promise<SseEvent[]> {
    const more: SseEvent[] = [];
    const deadline = Date.now() + ms;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) return more;
      try {
        more.push(await stream.next(left));
      } catch {
        return more;
      }
    }
  }

  it('legacy era: a cancel made while A’s listener is down reaches the session’s GET stream on A, once', async () => {
    const c = await LegacyClient.open(urlA, {}, asUser(freshUser()));
    const stream = await c.openGetStream();
    try {
      await stream.next(); // priming
      const task = await c.createTask('slow_compute', { seconds: 30 });
      await nextMatching(stream, isStatus(task.taskId, 'working'));

      const outage = await failover();
      const cancelled = await settle<{ status: string }>(() =>
        c.send('tasks/cancel', { taskId: task.taskId }),
      );
      expect(cancelled.status).toBe('cancelled');
      expect(
        (await settle<{ status: string }>(() => c.send('tasks/get', { taskId: task.taskId }))).status,
      ).toBe('cancelled');
      await outage.restore();

      const { seen } = await nextMatching(stream, isStatus(task.taskId, 'cancelled'), 15000);
      const about = [...seen, ...(await rest(stream))].filter(
        (ev) => ev.json?.method === 'notifications/tasks/status' && ev.json.params.taskId === task.taskId,
      );
      expect(about.map((ev) => ev.json.params.status)).toEqual(['cancelled']);
    } finally {
      stream.close();
    }
  });

  it('legacy era: a change made on B while A’s listener is down reaches the stream A holds', async () => {
    const c = await LegacyClient.open(urlA, {}, asUser(freshUser()));
    const stream = await c.openGetStream();
    try {
      await stream.next();
      const task = await c.createTask('slow_compute', { seconds: 30 });
      await nextMatching(stream, isStatus(task.taskId, 'working'));
      const outage = await failover();
      await c.at(urlB).result('tasks/cancel', { taskId: task.taskId });
      await outage.restore();
      const { seen } = await nextMatching(stream, isStatus(task.taskId, 'cancelled'), 15000);
      const about = [...seen, ...(await rest(stream))].filter(
        (ev) => ev.json?.method === 'notifications/tasks/status' && ev.json.params.taskId === task.taskId,
      );
      expect(about.map((ev) => ev.json.params.status)).toEqual(['cancelled']);
    } finally {
      stream.close();
    }
  });

  it('legacy era: many tasks of one session changed in parallel on two instances: each change once, in order', async () => {
    const c = await LegacyClient.open(urlA, {}, asUser(freshUser()));
    const stream = await c.openGetStream();
    try {
      const priming = await stream.next();
      const n = 16;
      const created = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          (i % 2 ? c : c.at(urlB)).createTask('slow_compute', { seconds: 30 }),
        ),
      );
      await Promise.all(
        created.map((t, i) => (i % 2 ? c.at(urlB) : c).result('tasks/cancel', { taskId: t.taskId })),
      );
      const byTask = new Map<string, string[]>();
      const ids: number[] = [];
      let done = 0;
      while (done < n) {
        const ev = await stream.next(15000);
        if (ev.json?.method !== 'notifications/tasks/status') continue;
        ids.push(Number(/_(\d+)$/.exec(ev.id!)![1]));
        const list = byTask.get(ev.json.params.taskId) ?? [];
        list.push(ev.json.params.status);
        byTask.set(ev.json.params.taskId, list);
        if (ev.json.params.status === 'cancelled') done++;
      }
      for (const t of created) expect(byTask.get(t.taskId)).toEqual(['working', 'cancelled']);
      // The stream's ids count up one by one after the priming event: no gap, no repeat.
      const first = Number(/_(\d+)$/.exec(priming.id!)![1]);
      expect(ids).toEqual(Array.from({ length: 2 * n }, (_, i) => first + 1 + i));
      expect(await rest(stream, 500)).toEqual([]);
    } finally {
      stream.close();
    }
  });

  it('2026-07-28: a cancel made while A’s listener is down reaches a subscriptions/listen subscriber on A, once', async () => {
    const user = freshUser();
    const headers = asUser(user);
    const created = await settle<{ resultType: string; taskId: string }>(() =>
      modern(urlA, 'tools/call', { name: 'slow_compute', arguments: { seconds: 30 } }, { headers }),
    );
    expect(created.resultType).toBe('task');
    const id = rpcId();
    const stream = await openStream(urlA, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN,
        'mcp-method': 'subscriptions/listen',
        ...headers,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id,
        method: 'subscriptions/listen',
        params: {
          notifications: { taskIds: [created.taskId] },
          _meta: {
            'io.modelcontextprotocol/protocolVersion': MODERN,
            'io.modelcontextprotocol/clientCapabilities': EXT_CAPS,
          },
        },
      }),
    });
    try {
      const ack = await stream.next();
      expect(ack.json.params.notifications.taskIds).toEqual([created.taskId]);

      const outage = await failover();
      await settle(() => modern(urlA, 'tasks/cancel', { taskId: created.taskId }, { headers }));
      const got = await settle<{ status: string }>(() =>
        modern(urlA, 'tasks/get', { taskId: created.taskId }, { headers }),
      );
      expect(got.status).toBe('cancelled');
      await outage.restore();

      const { event, seen } = await nextMatching(
        stream,
        (ev) => ev.json?.method === 'notifications/tasks' && ev.json.params.status === 'cancelled',
        15000,
      );
      expect(event.json.params).toMatchObject({ taskId: created.taskId, status: 'cancelled' });
      const tasks = [...seen, ...(await rest(stream))].filter(
        (ev) => ev.json?.method === 'notifications/tasks',
      );
      // The newest state once; nothing older after it.
      expect(tasks.map((ev) => ev.json.params.status)).toEqual(['cancelled']);
    } finally {
      stream.close();
    }
  });
});
