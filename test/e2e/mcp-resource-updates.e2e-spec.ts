import type { INestApplication } from '@nestjs/common';
import { McpNotifier } from '../../src/tool-dispatch/index.js';
import { openSession, openStream, rpc, sessionHeaders } from '../support/mcp-http.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/** resources/subscribe → notifications/resources/updated on the session's GET stream, from any instance. */
describe('resource update notifications', () => {
  let db: TestDatabase;
  let a: INestApplication;
  let b: INestApplication;
  let urlA: string;
  const uri = 'test://watched-resource';

  beforeAll(async () => {
    db = await createTestDatabase('resupd');
    a = await createTestApp(db.url, { MCP_CONFORMANCE_FIXTURES: 'true' });
    b = await createTestApp(db.url, { MCP_CONFORMANCE_FIXTURES: 'true' });
    urlA = `${await a.getUrl()}/mcp`;
  });
  afterAll(async () => {
    await Promise.all([a.close(), b.close()]);
    await db.drop();
  });

  it('reaches subscribed sessions only, even when another instance announces the change', async () => {
    const watcher = await openSession(urlA);
    await openSession(urlA); // a second session that never subscribes
    const sub = await rpc(
      urlA,
      { jsonrpc: '2.0', id: 1, method: 'resources/subscribe', params: { uri } },
      sessionHeaders(watcher),
    );
    expect(sub.json).toEqual({ jsonrpc: '2.0', id: 1, result: {} });
    const stream = await openStream(urlA, {
      method: 'GET',
      headers: { accept: 'text/event-stream', ...sessionHeaders(watcher) },
    });
    const priming = await stream.next();
    expect(priming.data).toBe('');

    // Announced on instance B; the GET stream is held by instance A.
    await expect(b.get(McpNotifier).resourceUpdated(uri)).resolves.toBe(1);
    const event = await stream.next(5000);
    expect(event.json).toEqual({
      jsonrpc: '2.0',
      method: 'notifications/resources/updated',
      params: { uri },
    });
    expect(event.id).toMatch(/^g_\d+$/);
    await expect(b.get(McpNotifier).resourceUpdated('test://static-text')).resolves.toBe(0);

    await rpc(
      urlA,
      { jsonrpc: '2.0', id: 2, method: 'resources/unsubscribe', params: { uri } },
      sessionHeaders(watcher),
    );
    await expect(a.get(McpNotifier).resourceUpdated(uri)).resolves.toBe(0);
    stream.close();
  });
});
