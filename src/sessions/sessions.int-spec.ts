import type { INestApplication } from '@nestjs/common';
import { ANONYMOUS_PRINCIPAL, type Principal } from '../principals/principal.js';
import { createTestApp } from '../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
import { ClientResponsesRepository } from './client-responses.repository.js';
import { SessionError } from './sessions.errors.js';
import { DataSource } from 'typeorm';
import { inTransaction } from '../database/sql-transaction.js';
import { SessionsService } from './sessions.service.js';
import { SseEventsRepository } from './sse-events.repository.js';

describe('sessions, the SSE event log and parked responses on real PostgreSQL', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let sessions: SessionsService;
  let events: SseEventsRepository;
  let parked: ClientResponsesRepository;
  const bob: Principal = { ...ANONYMOUS_PRINCIPAL, id: 'proxy:bob', provider: 'proxy', subject: 'bob' };

  beforeAll(async () => {
    db = await createTestDatabase('sessions');
    app = await createTestApp(db.url, { SESSION_IDLE_TTL_MS: '60000', SSE_EVENT_TTL_MS: '60000' });
    sessions = app.get(SessionsService);
    events = app.get(SseEventsRepository);
    parked = app.get(ClientResponsesRepository);
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('resolves a session only for the principal that opened it', async () => {
    const s = await sessions.open(ANONYMOUS_PRINCIPAL, '2025-11-25', { elicitation: {} }, { name: 'c' });
    expect(s.id).toMatch(/^[\x21-\x7e]{32}$/);
    await expect(sessions.resolve(s.id, ANONYMOUS_PRINCIPAL)).resolves.toMatchObject({ id: s.id });
    const foreign = await sessions.resolve(s.id, bob).catch((e: unknown) => e);
    const unknown = await sessions.resolve('no-such-session', bob).catch((e: unknown) => e);
    expect(foreign).toBeInstanceOf(SessionError);
    expect((foreign as Error).message).toBe((unknown as Error).message);
  });

  it('ends idle sessions and deletes long-ended ones with their events', async () => {
    const idle = await sessions.open(ANONYMOUS_PRINCIPAL, '2025-11-25', {}, null);
    const fresh = await sessions.open(ANONYMOUS_PRINCIPAL, '2025-11-25', {}, null);
    await events.append(idle.id, 'g', { jsonrpc: '2.0', method: 'x' });
    await withClient(db.url, async (c) => {
      await c.query(`UPDATE mcp_session SET last_seen_at = now() - interval '2 minutes' WHERE id = $1`, [
        idle.id,
      ]);
    });
    await sessions.sweep();
    await expect(sessions.resolve(idle.id, ANONYMOUS_PRINCIPAL)).rejects.toBeInstanceOf(SessionError);
    await expect(sessions.resolve(fresh.id, ANONYMOUS_PRINCIPAL)).resolves.toBeDefined();
    await withClient(db.url, async (c) => {
      await c.query(`UPDATE mcp_session SET ended_at = now() - interval '2 minutes' WHERE id = $1`, [
        idle.id,
      ]);
    });
    await sessions.sweep();
    const left = await withClient(db.url, (c) =>
      c.query(
        'SELECT (SELECT count(*)::int FROM mcp_session WHERE id = $1) AS s, (SELECT count(*)::int FROM mcp_sse_event WHERE session_id = $1) AS e',
        [idle.id],
      ),
    );
    expect(left.rows[0]).toEqual({ s: 0, e: 0 });
  });

  it('logs no outbox event for a session that is gone, and sweeps counters left without a session', async () => {
    const gone = await sessions.open(ANONYMOUS_PRINCIPAL, '2025-11-25', {}, null);
    const live = await sessions.open(ANONYMOUS_PRINCIPAL, '2025-11-25', {}, null);
    await events.append(live.id, 'g', { jsonrpc: '2.0', method: 'kept' });
    await withClient(db.url, (c) =>
      c.query(`UPDATE mcp_session SET ended_at = now() - interval '2 minutes' WHERE id = $1`, [gone.id]),
    );
    await sessions.sweep();
    const rowsOf = (id: string) =>
      withClient(db.url, async (c) => {
        const r = await c.query(
          `SELECT (SELECT count(*)::int FROM mcp_sse_stream WHERE session_id = $1) AS counters,
                  (SELECT count(*)::int FROM mcp_sse_event WHERE session_id = $1) AS events`,
          [id],
        );
        return r.rows[0] as { counters: number; events: number };
      });
    expect(await rowsOf(gone.id)).toEqual({ counters: 0, events: 0 });

    // A task outlives its session: its status change still commits, with an outbox append for the session.
    await inTransaction(app.get(DataSource), { lockTimeoutMs: 0 }, async (tx) => {
      await tx.query('SELECT 1');
      events.appendAtCommit(tx, gone.id, 'g', { jsonrpc: '2.0', method: 'notifications/tasks/status' });
    });
    expect(await rowsOf(gone.id)).toEqual({ counters: 0, events: 0 });

    // An append that raced the session's deletion can still leave a counter (and its event): the sweep removes
    // them, and only them.
    await withClient(db.url, async (c) => {
      await c.query(`INSERT INTO mcp_sse_stream (session_id, stream_id, last_seq) VALUES ($1, 'g', 1)`, [
        gone.id,
      ]);
      await c.query(
        `INSERT INTO mcp_sse_event (session_id, stream_id, seq, payload) VALUES ($1, 'g', 1, '{}')`,
        [gone.id],
      );
    });
    await sessions.sweep();
    expect(await rowsOf(gone.id)).toEqual({ counters: 0, events: 0 });
    expect(await rowsOf(live.id)).toEqual({ counters: 1, events: 1 });
  });

  it('replays a stream in order after an event id, and only that stream', async () => {
    const s = await sessions.open(ANONYMOUS_PRINCIPAL, '2025-11-25', {}, null);
    const first = await events.append(s.id, 'pA', null);
    const seqs = [];
    for (let i = 0; i < 5; i++) {
      seqs.push(await events.append(s.id, 'pA', { n: i }));
      await events.append(s.id, 'pB', { other: i });
    }
    const replay = await events.readAfter(s.id, 'pA', seqs[1]);
    expect(replay.map((e) => e.payload)).toEqual([{ n: 2 }, { n: 3 }, { n: 4 }]);
    expect((await events.readAfter(s.id, 'pA', first)).length).toBe(5);
    expect(await events.readAfter('another-session', 'pA', first)).toEqual([]);
  });

  it('keeps only the newest events of a stream when pruned', async () => {
    const s = await sessions.open(ANONYMOUS_PRINCIPAL, '2025-11-25', {}, null);
    for (let i = 0; i < 20; i++) await events.append(s.id, 'g', { n: i });
    await events.pruneStream(s.id, 'g', 5);
    const kept = await events.readAfter(s.id, 'g', '0');
    expect(kept.map((e) => e.payload)).toEqual([15, 16, 17, 18, 19].map((n) => ({ n })));
  });

  it('hands a parked client response to exactly one of many concurrent takers', async () => {
    const answer = { jsonrpc: '2.0', id: 'srv-abc', result: { action: 'accept' } };
    await parked.expect('sess-1', 'srv-abc');
    expect(await parked.take('sess-1', 'srv-abc')).toBeUndefined(); // outstanding, not answered yet
    expect(await parked.park('sess-1', 'srv-abc', answer, 60, 1024, 60000)).toEqual({ kind: 'parked' });
    const takes = await Promise.all(Array.from({ length: 12 }, () => parked.take('sess-1', 'srv-abc')));
    const got = takes.filter((t) => t !== undefined);
    expect(got).toEqual([{ jsonrpc: '2.0', id: 'srv-abc', result: { action: 'accept' } }]);
  });

  it('parks only answers to outstanding requests, once each, within the session quota', async () => {
    const answer = (id: string) => ({ jsonrpc: '2.0', id, result: {} });
    // Never sent, or sent in another session: refused.
    expect(await parked.park('sess-2', 'srv-none', answer('srv-none'), 10, 100, 60000)).toEqual({
      kind: 'not_awaited',
    });
    await parked.expect('sess-other', 'srv-a');
    expect(await parked.park('sess-2', 'srv-a', answer('srv-a'), 10, 100, 60000)).toEqual({
      kind: 'not_awaited',
    });
    await parked.expect('sess-2', 'srv-a');
    await parked.expect('sess-2', 'srv-b');
    await parked.expect('sess-2', 'srv-c');
    expect(await parked.park('sess-2', 'srv-a', answer('srv-a'), 60, 100, 60000)).toEqual({ kind: 'parked' });
    // Answered already: the first answer stays.
    expect(await parked.park('sess-2', 'srv-a', answer('srv-a'), 1, 100, 60000)).toEqual({
      kind: 'not_awaited',
    });
    // 60 stored + 50 > 100; the request stays outstanding, so a smaller answer still fits.
    expect(await parked.park('sess-2', 'srv-b', answer('srv-b'), 50, 100, 60000)).toEqual({
      kind: 'over_quota',
      stored: 60,
    });
    expect(await parked.park('sess-2', 'srv-b', answer('srv-b'), 40, 100, 60000)).toEqual({ kind: 'parked' });
    // Concurrent answers to one session count each other: of these, exactly as many fit as the quota allows.
    for (let i = 0; i < 8; i++) await parked.expect('sess-3', `srv-${i}`);
    const verdicts = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        parked.park('sess-3', `srv-${i}`, answer(`srv-${i}`), 30, 100, 60000),
      ),
    );
    expect(verdicts.filter((v) => v.kind === 'parked')).toHaveLength(3);
    // Past its timeout a request is outstanding no longer.
    await new Promise((r) => setTimeout(r, 30));
    expect(await parked.park('sess-2', 'srv-c', answer('srv-c'), 1, 1000, 10)).toEqual({
      kind: 'not_awaited',
    });
  });
});
