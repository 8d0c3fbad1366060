import type { INestApplication } from '@nestjs/common';
import { McpNotifier } from '../../src/tool-dispatch/index.js';
import { openSession, openStream, rpc, sessionHeaders } from '../support/mcp-http.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

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

/**
 * Issue 18, item 5: concurrent resources/subscribe and unsubscribe calls on one session, spread over two
 * instances, each change its row in the database; none overwrites another's with the copy it resolved.
 */
describe('concurrent subscription changes of one session (two instances, real PostgreSQL)', () => {
  const QUOTA = 25;
  let db: TestDatabase;
  let a: INestApplication;
  let b: INestApplication;
  let urls: string[];

  beforeAll(async () => {
    db = await createTestDatabase('resupd_race');
    const env = { MCP_CONFORMANCE_FIXTURES: 'true', QUOTA_SUBSCRIPTIONS_PER_SESSION: String(QUOTA) };
    a = await createTestApp(db.url, env);
    b = await createTestApp(db.url, env);
    urls = [`${await a.getUrl()}/mcp`, `${await b.getUrl()}/mcp`];
  });
  afterAll(async () => {
    await Promise.all([a.close(), b.close()]);
    await db.drop();
  });

  const call = (i: number, session: string, method: string, uri: string) =>
    rpc(urls[i % 2], { jsonrpc: '2.0', id: i + 1, method, params: { uri } }, sessionHeaders(session));

  async function stored(session: string): Promise<string[]> {
    const rows = await withClient(db.url, (c) =>
      c.query<{ uris: string[] }>('SELECT resource_subscriptions AS uris FROM mcp_session WHERE id = $1', [
        session,
      ]),
    );
    return [...rows.rows[0].uris].sort();
  }

  it('keeps every URI subscribed at once, removes exactly the ones unsubscribed, and holds the quota', async () => {
    const session = await openSession(urls[0]);
    // Both instances have the session in memory before the race, as a busy client's would.
    for (let i = 0; i < 2; i++) await call(i, session, 'ping', '');
    const uris = Array.from({ length: 20 }, (_, i) => `test://race/${String(i).padStart(2, '0')}`);

    const subscribed = await Promise.all(uris.map((uri, i) => call(i, session, 'resources/subscribe', uri)));
    expect(subscribed.map((r) => r.json?.result)).toEqual(uris.map(() => ({})));
    expect(await stored(session)).toEqual(uris);

    const gone = uris.filter((_, i) => i % 2 === 0);
    const unsubscribed = await Promise.all(
      gone.map((uri, i) => call(i, session, 'resources/unsubscribe', uri)),
    );
    expect(unsubscribed.map((r) => r.json?.result)).toEqual(gone.map(() => ({})));
    const kept = uris.filter((_, i) => i % 2 === 1);
    expect(await stored(session)).toEqual(kept);

    // 10 held; 20 more at once against a quota of 25: exactly 15 fit, the rest are refused.
    const more = Array.from({ length: 20 }, (_, i) => `test://more/${String(i).padStart(2, '0')}`);
    const answers = await Promise.all(more.map((uri, i) => call(i, session, 'resources/subscribe', uri)));
    const accepted = more.filter((_, i) => answers[i].json?.result !== undefined);
    const refused = answers.filter((r) => r.json?.error !== undefined);
    expect(accepted).toHaveLength(QUOTA - kept.length);
    expect(refused).toHaveLength(more.length - accepted.length);
    for (const r of refused) expect(r.json.error.message).toContain('QUOTA_SUBSCRIPTIONS_PER_SESSION');
    expect(await stored(session)).toEqual([...kept, ...accepted].sort());
  });
});
