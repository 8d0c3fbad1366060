import { openSession, openStream, responseOf, rpc, sessionHeaders } from '../support/mcp-http.js';
import { startServer, stopServer } from '../support/server-process.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/** SIGTERM on a spawned server: drain first, then stop. */
describe('graceful shutdown', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('drain');
  });
  afterAll(async () => {
    await db.drop();
  });

  it('turns readiness 503 at once, serves through the drain delay, then refuses and lets an in-flight call finish', async () => {
    const server = await startServer({
      DATABASE_URL: db.url,
      MCP_CONFORMANCE_FIXTURES: 'true',
      SHUTDOWN_GRACE_MS: '10000',
      SHUTDOWN_DRAIN_DELAY_MS: '1000',
    });
    const url = `${server.baseUrl}/mcp`;
    const session = await openSession(url);
    // slow_compute runs inline (no params.task) for 2 s.
    const inFlight = rpc(
      url,
      {
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'slow_compute', arguments: { seconds: 2 } },
      },
      sessionHeaders(session),
    );
    await new Promise((r) => setTimeout(r, 300));
    const t0 = Date.now();
    server.proc.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 200));

    const ready = await fetch(`${server.baseUrl}/health/ready`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as any).checks.shutdown.status).toBe('down');
    // Still served during the delay, on a connection closed after the answer.
    const served = await rpc(url, { jsonrpc: '2.0', id: 8, method: 'ping' }, sessionHeaders(session));
    expect(served.status).toBe(200);
    expect(served.headers.get('connection')).toBe('close');
    expect(responseOf(served)).toEqual({ jsonrpc: '2.0', id: 8, result: {} });
    // After it, the instance takes no new connection: nothing is sent, so a balancer retries it anywhere.
    await new Promise((r) => setTimeout(r, 1000));
    const refused = await rpc(url, { jsonrpc: '2.0', id: 9, method: 'ping' }, sessionHeaders(session)).then(
      (a) => a.status,
      (err: unknown) => (err as { cause?: { code?: string } }).cause?.code ?? String(err),
    );
    expect(refused).toBe('ECONNREFUSED');

    const answer = await inFlight;
    expect(answer.status).toBe(200);
    expect(responseOf(answer).result.content).toEqual([{ type: 'text', text: 'Computed result after 2 s' }]);
    expect(await server.exited).toBe(0);
    // It stopped once the call was done, well before the 10 s grace ran out.
    expect(Date.now() - t0).toBeLessThan(8000);
  });

  it('cuts what is still running when the grace period ends', async () => {
    const server = await startServer({
      DATABASE_URL: db.url,
      MCP_CONFORMANCE_FIXTURES: 'true',
      SHUTDOWN_GRACE_MS: '500',
      SHUTDOWN_DRAIN_DELAY_MS: '0',
    });
    const url = `${server.baseUrl}/mcp`;
    const session = await openSession(url);
    const inFlight = rpc(
      url,
      {
        jsonrpc: '2.0',
        id: 10,
        method: 'tools/call',
        params: { name: 'slow_compute', arguments: { seconds: 30 } },
      },
      sessionHeaders(session),
    ).catch((err: unknown) => err);
    await new Promise((r) => setTimeout(r, 300));
    const t0 = Date.now();
    await stopServer(server, 'SIGTERM');
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(server.output()).toMatch(/still running after the grace period/);
    await inFlight;
  });

  it('ends a GET stream opened before the announce at the announce, and one opened after it at the drain', async () => {
    // The first stream's headers carry no `Connection: close`: a balancer reuses its connection once it
    // ends, which must happen while the instance still answers, not after it stopped listening.
    const server = await startServer({
      DATABASE_URL: db.url,
      SHUTDOWN_GRACE_MS: '5000',
      SHUTDOWN_DRAIN_DELAY_MS: '2000',
    });
    const url = `${server.baseUrl}/mcp`;
    // Two sessions: a second GET stream of one session would replace its first.
    const streamInit = async () => ({
      method: 'GET',
      headers: { ...sessionHeaders(await openSession(url)), accept: 'text/event-stream' },
    });
    const lateInit = await streamInit();
    const endOf = async (stream: Awaited<ReturnType<typeof openStream>>): Promise<number> => {
      for (;;) {
        try {
          await stream.next(500);
        } catch (err) {
          if ((err as Error).message === 'stream ended') return Date.now();
          if ((err as Error).message !== 'no SSE event in time') throw err;
        }
      }
    };
    const before = await openStream(url, await streamInit());
    expect(before.status).toBe(200);
    expect(before.headers.get('connection')).not.toBe('close');
    const beforeEnded = endOf(before);
    const t0 = Date.now();
    server.proc.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    const after = await openStream(url, lateInit);
    expect(after.status).toBe(200);
    expect(after.headers.get('connection')).toBe('close');
    const afterEnded = endOf(after);
    expect((await beforeEnded) - t0).toBeLessThan(1000);
    expect((await afterEnded) - t0).toBeGreaterThanOrEqual(1900);
    expect(await server.exited).toBe(0);
  });
});
