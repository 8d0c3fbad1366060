import type { INestApplication } from '@nestjs/common';
import { SessionsService } from '../../src/sessions/sessions.service.js';
import { McpNotifier } from '../../src/tool-dispatch/index.js';
import { openSession, openStream, rpc, sessionHeaders, type SseEvent } from '../support/mcp-http.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

/**
 * Issue 18, item 6: the session sweep deletes events older than SSE_EVENT_TTL_MS, including, often, the very
 * event a client saw last. Resuming from it replays whatever is still logged after it, judged by the stream's
 * counter; when events the client never saw are gone too, the resume is refused with 410 rather than turned
 * into a fresh stream that silently skips them.
 */
describe('resuming with a Last-Event-ID whose event has aged out (real HTTP, real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;
  const uri = 'test://aged-out';

  beforeAll(async () => {
    db = await createTestDatabase('sse_aged_out');
    app = await createTestApp(db.url, { MCP_CONFORMANCE_FIXTURES: 'true', SSE_EVENT_TTL_MS: '60000' });
    url = `${await app.getUrl()}/mcp`;
  });
  const open: { close(): void }[] = [];
  afterAll(async () => {
    for (const s of open) s.close(); // a failed assertion must not leave a stream holding the app open
    await app.close();
    await db.drop();
  });

  const seqOf = (id: string) => Number(/_(\d+)$/.exec(id)![1]);

  /** Makes the stream's events up to `seq` older than SSE_EVENT_TTL_MS and runs the sweep that deletes them. */
  async function ageOut(session: string, seq: number): Promise<void> {
    await withClient(db.url, (c) =>
      c.query(
        `UPDATE mcp_sse_event SET created_at = now() - interval '2 hours'
          WHERE session_id = $1 AND stream_id = 'g' AND seq <= $2`,
        [session, seq],
      ),
    );
    await app.get(SessionsService).sweep();
  }

  async function resume(session: string, lastEventId?: string) {
    const stream = await openStream(url, {
      method: 'GET',
      headers: {
        accept: 'text/event-stream',
        ...sessionHeaders(session),
        ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
      },
    });
    open.push(stream);
    return stream;
  }

  it('replays what is still logged after an aged-out id, and refuses when unseen events are gone', async () => {
    const session = await openSession(url);
    const sub = await rpc(
      url,
      { jsonrpc: '2.0', id: 1, method: 'resources/subscribe', params: { uri } },
      sessionHeaders(session),
    );
    expect(sub.json?.result).toEqual({});
    const stream = await resume(session);
    const priming = await stream.next();
    expect(priming.data).toBe('');
    for (let i = 0; i < 3; i++) await app.get(McpNotifier).resourceUpdated(uri);
    const seen: SseEvent[] = [];
    for (let i = 0; i < 3; i++) seen.push(await stream.next(5000));
    stream.close();
    const [e1, e2, e3] = seen.map((e) => e.id!);
    expect([seqOf(e2), seqOf(e3)]).toEqual([seqOf(e1) + 1, seqOf(e1) + 2]);

    // The client saw e1 last; e1 (and the priming event) aged out, e2 and e3 did not.
    await ageOut(session, seqOf(e1));
    const resumed = await resume(session, e1);
    expect(resumed.status).toBe(200);
    const replay = [await resumed.next(5000), await resumed.next(5000)];
    resumed.close();
    expect(replay.map((e) => e.id)).toEqual([e2, e3]);
    expect(replay.map((e) => e.json?.method)).toEqual([
      'notifications/resources/updated',
      'notifications/resources/updated',
    ]);

    // Now e2 is gone too: resuming from e1 would skip it, so the resume is refused and says so.
    await ageOut(session, seqOf(e2));
    const refused = await rpc(
      url,
      undefined,
      { ...sessionHeaders(session), accept: 'text/event-stream', 'last-event-id': e1 },
      'GET',
    );
    expect(refused.status).toBe(410);
    expect(refused.json?.error).toMatchObject({
      code: -32000,
      data: { lastEventId: e1, missedEvents: 1 },
    });
    expect(refused.json.error.message).toMatch(/^Gone: 1 event\(s\) after Last-Event-ID/);

    // From e2 (gone itself, but e3 right after it is logged) the resume still works.
    const fromE2 = await resume(session, e2);
    expect(fromE2.status).toBe(200);
    expect((await fromE2.next(5000)).id).toBe(e3);
    fromE2.close();
  });
});
