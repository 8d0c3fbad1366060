import type { INestApplication } from '@nestjs/common';
import type { Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConnectionTracker } from '../../src/lifecycle/connection-tracker.service.js';
import { stopListening } from '../../src/lifecycle/graceful-shutdown.js';
import { LifecycleService } from '../../src/lifecycle/lifecycle.service.js';
import { openSession, sessionHeaders } from '../support/mcp-http.js';
import { HeldConnection, MCP_POST } from '../support/raw-http.js';
import { asUser, PROXY_SECRET } from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const DRAIN_DELAY_MS = 1500;
const ENV = {
  AUTH_PROVIDERS: 'proxy',
  AUTH_PROXY_SECRET: PROXY_SECRET,
  SHUTDOWN_DRAIN_DELAY_MS: String(DRAIN_DELAY_MS),
  MCP_CONFORMANCE_FIXTURES: 'true',
};
const PING = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'ping' });

/**
 * A balancer keeps upstream connections open between requests and may send the next request on one at any
 * moment until its own idle timeout closes it. A drain must not end such a connection from this side while
 * that can happen: nginx meets the close as "upstream prematurely closed connection" under a request it has
 * sent, and cannot retry a POST. These cases run the steps graceful shutdown runs after the drain delay
 * (stop listening, begin the drain, end idle connections) against the real app over a connection held by
 * hand, as nginx's pool holds one.
 */
describe('drain: connections an answer left open (real HTTP)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let origin: string;
  const held: HeldConnection[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('drain_conns');
  });
  beforeEach(async () => {
    app = await createTestApp(db.url, ENV);
    origin = await loopbackUrl(app);
  });
  afterEach(async () => {
    for (const c of held.splice(0)) c.destroy();
    await app.close();
  });
  afterAll(async () => {
    await db?.drop();
  });

  const hold = async (): Promise<HeldConnection> => {
    const c = await HeldConnection.open(origin);
    held.push(c);
    return c;
  };
  /** What graceful shutdown does once the drain delay is over. */
  const stopAndDrain = async (): Promise<void> => {
    await stopListening(app.getHttpServer() as Server);
    app.get(LifecycleService).beginDrain();
    app.get(ConnectionTracker).closeIdleConnections();
  };
  /**
   * The connection is still open a while after the close, and the balancer's next request on it is answered
   * (closing it), though the instance stopped listening and began draining.
   */
  const servesTheNextRequest = async (
    conn: HeldConnection,
    headers: Record<string, string>,
  ): Promise<void> => {
    await sleep(300);
    expect(conn.ended).toBe(false);
    const next = await conn.send('POST', '/mcp', { ...MCP_POST, ...headers }, PING).answer;
    expect(next.status).toBe(200);
    expect(next.headers.connection).toBe('close');
    expect(JSON.parse(next.text)).toMatchObject({ jsonrpc: '2.0', id: 7, result: {} });
    await conn.closedBy;
  };

  it('keeps the connection of a stream that ended at the announce open past the close, and serves the next request on it', async () => {
    const user = asUser('drain-conn-user');
    const session = await openSession(`${origin}/mcp`, {}, user);
    const conn = await hold();
    const stream = conn.send('GET', '/mcp', {
      ...sessionHeaders(session, user),
      accept: 'text/event-stream',
    });
    const head = await stream.head;
    expect(head.status).toBe(200);
    // Its headers went out before any drain: nothing told the balancer this connection would close.
    expect(head.headers.connection).not.toBe('close');

    app.get(LifecycleService).announceDrain();
    await stream.answer; // the stream ends at the announce; the connection goes back to the balancer's pool
    await stopAndDrain();
    await servesTheNextRequest(conn, sessionHeaders(session, user));
  });

  it('keeps the connection of an SSE answer that the drain ended open, and serves the next request on it', async () => {
    const user = asUser('drain-conn-sse');
    const session = await openSession(`${origin}/mcp`, { elicitation: {} }, user);
    const conn = await hold();
    // A call that waits on the client: its answer is an SSE stream whose headers went out before the drain.
    const call = conn.send(
      'POST',
      '/mcp',
      { ...MCP_POST, ...sessionHeaders(session, user) },
      JSON.stringify({
        jsonrpc: '2.0',
        id: 3,
        method: 'tools/call',
        params: { name: 'test_elicitation', arguments: { message: 'who?' } },
      }),
    );
    const head = await call.head;
    expect(head.status).toBe(200);
    expect(head.headers['content-type']).toMatch(/text\/event-stream/);
    expect(head.headers.connection).not.toBe('close');

    app.get(LifecycleService).announceDrain();
    await stopAndDrain();
    await call.answer; // the drain ends the request's stream; the client resumes it elsewhere
    await servesTheNextRequest(conn, sessionHeaders(session, user));
  });

  it('ends an idle kept connection once it has been idle for the drain delay, not at the close', async () => {
    const conn = await hold();
    const first = await conn.send('GET', '/health/live', {}).answer;
    expect(first.status).toBe(200);
    expect(first.headers.connection).not.toBe('close');
    const idleSince = Date.now();

    await stopAndDrain();
    const endedAfter = (await conn.closedBy) - idleSince;
    expect(endedAfter).toBeGreaterThanOrEqual(DRAIN_DELAY_MS - 50);
    expect(endedAfter).toBeLessThan(DRAIN_DELAY_MS + 1000);
    expect(await app.get(ConnectionTracker).allClosed(1000)).toBe(true);
  });

  it('ends at once a kept connection already idle for longer than the drain delay', async () => {
    const conn = await hold();
    expect((await conn.send('GET', '/health/live', {}).answer).status).toBe(200);
    await sleep(DRAIN_DELAY_MS + 100);
    const closing = Date.now();
    await stopAndDrain();
    expect((await conn.closedBy) - closing).toBeLessThan(500);
  });

  it('allClosed resolves when the last connection an answer left open is closed', async () => {
    const tracker = app.get(ConnectionTracker);
    const conn = await hold();
    expect((await conn.send('GET', '/health/live', {}).answer).status).toBe(200);
    await stopAndDrain();
    expect(await tracker.allClosed(100)).toBe(false); // still within its idle window
    const started = Date.now();
    conn.destroy(); // the balancer's idle timeout closes it
    expect(await tracker.allClosed(5000)).toBe(true);
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
