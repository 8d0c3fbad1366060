import type { INestApplication } from '@nestjs/common';
import { openSession, rpc, sessionHeaders } from '../support/mcp-http.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/**
 * notifications/cancelled in the legacy era: the handler's AbortSignal fires wherever the request runs,
 * and the cancelled request gets no JSON-RPC response (the POST ends 202 with no body).
 */
describe('cancelling a legacy request', () => {
  let db: TestDatabase;
  let a: INestApplication;
  let b: INestApplication;
  let urlA: string;
  let urlB: string;

  beforeAll(async () => {
    db = await createTestDatabase('cancel');
    a = await createTestApp(db.url, { MCP_CONFORMANCE_FIXTURES: 'true' });
    b = await createTestApp(db.url, { MCP_CONFORMANCE_FIXTURES: 'true' });
    urlA = await loopbackUrl(a, '/mcp');
    urlB = await loopbackUrl(b, '/mcp');
  });
  afterAll(async () => {
    await Promise.all([a.close(), b.close()]);
    await db.drop();
  });

  const slowCall = (url: string, session: string, id: number) =>
    rpc(
      url,
      {
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'slow_compute', arguments: { seconds: 30 } },
      },
      sessionHeaders(session),
    );

  const cancel = (url: string, session: string, requestId: number) =>
    rpc(
      url,
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, reason: 'user gave up' } },
      sessionHeaders(session),
    );

  it.each([
    ['on the same instance', () => urlA],
    ['from another instance', () => urlB],
  ])('aborts the handler and sends no response when cancelled %s', async (_label, cancelUrl) => {
    const session = await openSession(urlA);
    const t0 = Date.now();
    const call = slowCall(urlA, session, 41);
    await new Promise((r) => setTimeout(r, 300));
    const ack = await cancel(cancelUrl(), session, 41);
    expect(ack.status).toBe(202);
    const answer = await call;
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(answer.status).toBe(202);
    expect(answer.text).toBe('');
    // The session goes on serving other requests.
    const ping = await rpc(urlA, { jsonrpc: '2.0', id: 42, method: 'ping' }, sessionHeaders(session));
    expect(ping.json).toEqual({ jsonrpc: '2.0', id: 42, result: {} });
  });

  it('ignores a cancellation for a request that is not running', async () => {
    const session = await openSession(urlA);
    const ack = await cancel(urlB, session, 999);
    expect(ack.status).toBe(202);
  });
});
