import type { INestApplication, LoggerService } from '@nestjs/common';
import { PgBusService } from '../../src/bus/pg-bus.service.js';
import { McpNotifier } from '../../src/tool-dispatch/index.js';
import { openStream, responseOf, rpc, sessionHeaders, type SseEvent } from '../support/mcp-http.js';
import { PgProxy } from '../support/pg-proxy.js';
import {
  asUser,
  freshUser,
  LegacyClient,
  listenInit,
  modern,
  nextMatching,
  PROXY_SECRET,
  rpcId,
} from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/** Keeps what the app warns about, so a test can tell that the step it aimed at really failed. */
class Warnings implements LoggerService {
  readonly lines: string[] = [];
  log(): void {}
  error(message: unknown): void {
    this.lines.push(String(message));
  }
  warn(message: unknown): void {
    this.lines.push(String(message));
  }
  seen(text: string): boolean {
    return this.lines.some((l) => l.includes(text));
  }
}

const OUTAGE_MS = 2000;

/**
 * Issue 18, item 1: with DATABASE_URL through a pooler and DATABASE_LISTEN_URL direct, only instance A's pooled
 * connections are cut. A still hears every NOTIFY, but the re-read each one triggers fails; nothing else will
 * wake it (no reconnect, hence no resync). Each delivery step must try again by itself once the pool is back.
 * B makes the changes (its tasks run there), so nothing on A but the retry can ask again.
 */
describe('delivery retries a failed re-read while the LISTEN connection stays up (real PostgreSQL, real HTTP)', () => {
  let db: TestDatabase;
  let proxy: PgProxy;
  let a: INestApplication;
  let b: INestApplication;
  let urlA: string;
  let urlB: string;
  const warnings = new Warnings();

  beforeAll(async () => {
    db = await createTestDatabase('delivery_retry');
    proxy = await PgProxy.start(db.url);
    const env = {
      MCP_CONFORMANCE_FIXTURES: 'true',
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      TASK_INLINE_WINDOW_MS: '100',
      JANITOR_ENABLED: 'false',
      CLIENT_REQUEST_TIMEOUT_MS: '60000',
    };
    b = await createTestApp(db.url, env);
    // The documented PgBouncer layout: the pool through the proxy, the LISTEN connection straight to PostgreSQL.
    a = await createTestApp(proxy.via(db.url), { ...env, DATABASE_LISTEN_URL: db.url }, [], {
      logger: warnings,
    });
    urlA = await loopbackUrl(a, '/mcp');
    urlB = await loopbackUrl(b, '/mcp');
  });
  afterAll(async () => {
    proxy?.refuse(undefined);
    await a?.close();
    await b?.close();
    await proxy?.close();
    await db?.drop();
  });

  /** Cuts every pooled connection of A and refuses new ones for OUTAGE_MS; A's listener is not behind the proxy. */
  async function poolOutage(during: () => Promise<void>): Promise<void> {
    expect(a.get(PgBusService).isConnected).toBe(true);
    warnings.lines.length = 0;
    proxy.refuse(() => true);
    proxy.cut(() => true);
    try {
      await during();
      await new Promise((r) => setTimeout(r, OUTAGE_MS));
    } finally {
      proxy.refuse(undefined);
    }
    // The LISTEN connection stayed up the whole time: no resync can have done the work.
    expect(a.get(PgBusService).isConnected).toBe(true);
  }

  const isStatus = (taskId: string, status: string) => (ev: SseEvent) =>
    ev.json?.method === 'notifications/tasks/status' &&
    ev.json.params.taskId === taskId &&
    ev.json.params.status === status;

  it('legacy era: a cancel on B reaches the GET stream A holds once A’s pool is back', async () => {
    const c = await LegacyClient.open(urlA, {}, asUser(freshUser()));
    const stream = await c.openGetStream();
    try {
      await stream.next(); // priming
      const task = await c.at(urlB).createTask('slow_compute', { seconds: 60 });
      await nextMatching(stream, isStatus(task.taskId, 'working'));
      await poolOutage(async () => {
        await c.at(urlB).result('tasks/cancel', { taskId: task.taskId });
        await waitForWarning('stream drain failed');
      });
      const { event } = await nextMatching(stream, isStatus(task.taskId, 'cancelled'), 10000);
      expect(event.json.params.status).toBe('cancelled');
    } finally {
      stream.close();
    }
  });

  it('2026-07-28: a cancel on B reaches a subscriptions/listen subscriber on A once A’s pool is back', async () => {
    const user = freshUser();
    const created = responseOf(
      await modern(
        urlB,
        'tools/call',
        { name: 'slow_compute', arguments: { seconds: 60 } },
        {
          headers: asUser(user),
        },
      ),
    ).result;
    expect(created.resultType).toBe('task');
    const stream = await openStream(urlA, listenInit(user, { taskIds: [created.taskId] }));
    try {
      expect(stream.status).toBe(200);
      await nextMatching(stream, (ev) => ev.json?.method === 'notifications/subscriptions/acknowledged');
      await poolOutage(async () => {
        const r = responseOf(
          await modern(urlB, 'tasks/cancel', { taskId: created.taskId }, { headers: asUser(user) }),
        );
        expect(r.result).toBeDefined();
        await waitForWarning('task subscription read failed');
      });
      const { event } = await nextMatching(
        stream,
        (ev) =>
          ev.json?.method === 'notifications/tasks' &&
          ev.json.params.taskId === created.taskId &&
          ev.json.params.status === 'cancelled',
        10000,
      );
      expect(event.json.params.status).toBe('cancelled');
    } finally {
      stream.close();
    }
  });

  it('legacy era: an elicitation answer parked by B is collected by the handler on A once A’s pool is back', async () => {
    const identity = asUser(freshUser());
    const c = await LegacyClient.open(urlA, { elicitation: {} }, identity);
    const call = await openStream(urlA, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...c.headers(),
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: rpcId(),
        method: 'tools/call',
        params: { name: 'test_elicitation', arguments: { message: 'who?' } },
      }),
    });
    try {
      const { event: ask } = await nextMatching(call, (ev) => ev.json?.method === 'elicitation/create');
      await poolOutage(async () => {
        const answer = await rpc(
          urlB,
          {
            jsonrpc: '2.0',
            id: ask.json.id,
            result: { action: 'accept', content: { username: 'bo', email: 'bo@example.com' } },
          },
          sessionHeaders(c.sessionId, identity),
        );
        expect(answer.status).toBe(202);
        await waitForWarning('could not collect a client response');
      });
      const { event: done } = await nextMatching(call, (ev) => ev.json?.result !== undefined, 10000);
      expect(done.json.result.content[0].text).toMatch(/^User response: action=accept/);
    } finally {
      call.close();
    }
  });

  it('legacy era: a NOTIFY cut after its event was logged on A still wakes the GET stream held by B', async () => {
    const uri = 'test://delivery-retry';
    const c = await LegacyClient.open(urlB, {}, asUser(freshUser()));
    expect((await c.call('resources/subscribe', { uri })).result).toEqual({});
    const stream = await c.openGetStream();
    try {
      await stream.next(); // priming
      warnings.lines.length = 0;
      // A logs the event through its pool, then its NOTIFY is cut on the wire, before PostgreSQL sees it.
      const cutAt = proxy.cutAtStatement((_, sql) => sql.includes('pg_notify'));
      await expect(a.get(McpNotifier).resourceUpdated(uri)).resolves.toBe(1);
      expect(await cutAt).toContain('pg_notify');
      expect(warnings.seen('stream wake-up failed')).toBe(true);
      const { event } = await nextMatching(
        stream,
        (ev) => ev.json?.method === 'notifications/resources/updated',
        10000,
      );
      expect(event.json.params).toEqual({ uri });
    } finally {
      stream.close();
    }
  });

  /** The aimed-at step failed (bounded wait): A heard the NOTIFY and its read hit the cut pool. */
  async function waitForWarning(text: string): Promise<void> {
    for (let i = 0; i < 100 && !warnings.seen(text); i++) await new Promise((r) => setTimeout(r, 20));
    expect(warnings.seen(text)).toBe(true);
  }
});
