import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { ANONYMOUS_PRINCIPAL } from '../principals/principal.js';
import { createTestApp } from '../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
import { SessionsService } from './sessions.service.js';
import { SseEventsRepository, type LoggedEvent } from './sse-events.repository.js';
import { MIGRATIONS, SCHEMA } from '../schema.js';
import { buildDataSourceOptions } from '../database/typeorm-options.js';
import { inTransaction } from '../database/sql-transaction.js';

/** Resolves once a backend of this database waits on a lock of this kind (pg_stat_activity.wait_event). */
async function waitForLockWait(db: TestDatabase, event: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const waiting = await withClient(db.url, (c) =>
      c.query(
        `SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock' AND wait_event = $2`,
        [db.name, event],
      ),
    );
    if (waiting.rowCount && waiting.rowCount > 0) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no backend waited on a ${event} lock`);
}

/** Resolves when `p` settles or a backend of this database waits on a lock, whichever comes first. */
async function settledOrBlocked(db: TestDatabase, p: Promise<unknown>): Promise<'settled' | 'blocked'> {
  let settled = false;
  p.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let i = 0; i < 500; i++) {
    if (settled) return 'settled';
    const waiting = await withClient(db.url, (c) =>
      c.query(
        `SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`,
        [db.name],
      ),
    );
    if (waiting.rowCount && waiting.rowCount > 0) return 'blocked';
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('neither settled nor blocked');
}

/** What a stream holder does: read after the last seq it sent, remember the newest. */
class Drainer {
  lastSeq = '0';
  readonly seen: LoggedEvent[] = [];
  constructor(
    private readonly events: SseEventsRepository,
    private readonly sessionId: string,
    private readonly streamId: string,
  ) {}
  async drain(): Promise<void> {
    for (const row of await this.events.readAfter(this.sessionId, this.streamId, this.lastSeq)) {
      this.seen.push(row);
      this.lastSeq = row.seq;
    }
  }
}

describe('the SSE event log keeps each stream gap-free in commit order (real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let events: SseEventsRepository;
  let sessions: SessionsService;

  beforeAll(async () => {
    db = await createTestDatabase('sse_log');
    app = await createTestApp(db.url);
    events = app.get(SseEventsRepository);
    sessions = app.get(SessionsService);
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('never lets a reader skip an event whose transaction commits after a later append', async () => {
    const s = await sessions.open(ANONYMOUS_PRINCIPAL, '2025-11-25', {}, null);
    const reader = new Drainer(events, s.id, 'g');
    const qr = app.get(DataSource).createQueryRunner();
    await qr.connect();
    try {
      await qr.startTransaction();
      // First event: logged inside a transaction that stays open (an outbox write still committing).
      await events.append(s.id, 'g', { n: 1 }, false, qr.manager);
      // Second event on the same stream, from another connection, while the first is uncommitted.
      const second = events.append(s.id, 'g', { n: 2 });
      // Either it waits for the first (per-stream order) or, numbered from one global sequence, it has
      // committed already: a holder woken now would then send event 2 and move past event 1.
      await settledOrBlocked(db, second);
      await reader.drain();
      await qr.commitTransaction();
      await second;
      await reader.drain();
      expect(reader.seen.map((e) => e.payload)).toEqual([{ n: 1 }, { n: 2 }]);
      // Replay from the start (Last-Event-ID before both) gives the same, in the same order.
      const replay = await events.readAfter(s.id, 'g', '0');
      expect(replay.map((e) => e.payload)).toEqual([{ n: 1 }, { n: 2 }]);
    } finally {
      if (qr.isTransactionActive) await qr.rollbackTransaction();
      await qr.release();
    }
  });

  it('numbers a stream 1, 2, 3… under many parallel writers while a reader drains, each event seen once', async () => {
    const s = await sessions.open(ANONYMOUS_PRINCIPAL, '2025-11-25', {}, null);
    const reader = new Drainer(events, s.id, 'g');
    const other = new Drainer(events, s.id, 'pOther');
    let writing = true;
    const draining = (async () => {
      while (writing) {
        await reader.drain();
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const total = 120;
    await Promise.all(
      Array.from({ length: total }, (_, i) =>
        app.get(DataSource).transaction(async (m) => {
          await events.append(s.id, 'g', { i }, false, m);
          // Another stream of the same session in the same transaction: streams do not share numbers.
          if (i % 3 === 0) await events.append(s.id, 'pOther', { i }, false, m);
        }),
      ),
    );
    writing = false;
    await draining;
    await reader.drain();
    await other.drain();
    expect(reader.seen.map((e) => Number(e.seq))).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    expect(new Set(reader.seen.map((e) => (e.payload as { i: number }).i)).size).toBe(total);
    expect(other.seen.map((e) => Number(e.seq))).toEqual(Array.from({ length: total / 3 }, (_, i) => i + 1));
  });

  it('a rolled-back append leaves no hole and no event', async () => {
    const s = await sessions.open(ANONYMOUS_PRINCIPAL, '2025-11-25', {}, null);
    await events.append(s.id, 'g', { n: 1 });
    await app
      .get(DataSource)
      .transaction(async (m) => {
        await events.append(s.id, 'g', { n: 'rolled back' }, false, m);
        throw new Error('abort');
      })
      .catch(() => undefined);
    await events.append(s.id, 'g', { n: 2 });
    const rows = await events.readAfter(s.id, 'g', '0');
    expect(rows.map((r) => [r.seq, r.payload])).toEqual([
      ['1', { n: 1 }],
      ['2', { n: 2 }],
    ]);
  });

  describe('the outbox logs nothing before a stream has issued an id', () => {
    const status = (n: number) => ({ jsonrpc: '2.0', method: 'notifications/tasks/status', params: { n } });
    const outbox = (sessionId: string, n: number, after?: string) =>
      inTransaction(app.get(DataSource), { lockTimeoutMs: 0 }, async (tx) => {
        await tx.query('SELECT 1');
        events.appendAtCommit(tx, sessionId, 'g', status(n));
        // Holds the transaction open after its append (the counter row stays locked) until the key is free.
        if (after) tx.atCommit(after);
      });
    const logged = (sessionId: string) =>
      withClient(db.url, async (c) => {
        const r = await c.query(
          `SELECT (SELECT last_seq::int FROM mcp_sse_stream WHERE session_id = $1 AND stream_id = 'g') AS counter,
                  (SELECT count(*)::int FROM mcp_sse_event WHERE session_id = $1) AS events`,
          [sessionId],
        );
        return r.rows[0] as { counter: number | null; events: number };
      });

    it('a session that only polls gets no event rows; once its GET stream is primed, every change is logged', async () => {
      const s = await sessions.open(ANONYMOUS_PRINCIPAL, '2025-11-25', {}, null);
      await outbox(s.id, 1);
      await outbox(s.id, 2);
      expect(await logged(s.id)).toEqual({ counter: 0, events: 0 });
      // No id was issued: a Last-Event-ID naming seq 0 is no resume point (the GET starts afresh).
      expect(await events.resumePoint(s.id, 'g', '0')).toEqual({ issued: false });
      const priming = await events.append(s.id, 'g', null);
      expect(priming).toBe('1');
      await outbox(s.id, 3);
      await outbox(s.id, 4);
      const after = await events.readAfter(s.id, 'g', priming);
      expect(after.map((e) => [e.seq, e.payload])).toEqual([
        ['2', status(3)],
        ['3', status(4)],
      ]);
      expect(await events.resumePoint(s.id, 'g', priming)).toMatchObject({ issued: true, missed: 0 });
    });

    it('a change committing while the first GET primes its stream waits for it and is logged after the priming id', async () => {
      const s = await sessions.open(ANONYMOUS_PRINCIPAL, '2025-11-25', {}, null);
      await outbox(s.id, 1); // the counter row exists, at 0
      const qr = app.get(DataSource).createQueryRunner();
      await qr.connect();
      try {
        await qr.startTransaction();
        const priming = await events.append(s.id, 'g', null, false, qr.manager);
        const change = outbox(s.id, 2);
        // Had the outbox skipped the append on the counter it saw (0), it would commit now, and the stream
        // that drains after its priming id would never get this change.
        expect(await settledOrBlocked(db, change)).toBe('blocked');
        await qr.commitTransaction();
        await change;
        const after = await events.readAfter(s.id, 'g', priming);
        expect(after.map((e) => e.payload)).toEqual([status(2)]);
      } finally {
        if (qr.isTransactionActive) await qr.rollbackTransaction();
        await qr.release();
      }
    });

    it('a priming that waits for an open outbox transaction numbers itself after a change it was never owed', async () => {
      const s = await sessions.open(ANONYMOUS_PRINCIPAL, '2025-11-25', {}, null);
      const key = 7_340_017;
      await withClient(db.url, async (holder) => {
        await holder.query('SELECT pg_advisory_lock($1)', [key]);
        const change = outbox(s.id, 1, `SELECT pg_advisory_xact_lock(${key})`);
        // The change's transaction has appended (its counter row, uncommitted) and waits for the key.
        await waitForLockWait(db, 'advisory');
        const priming = events.append(s.id, 'g', null);
        // The priming append waits for that transaction (the counter row it made), not the other way round.
        await waitForLockWait(db, 'transactionid');
        expect(await logged(s.id)).toEqual({ counter: null, events: 0 });
        await holder.query('SELECT pg_advisory_unlock($1)', [key]);
        await change;
        expect(await priming).toBe('1');
        expect(await logged(s.id)).toEqual({ counter: 1, events: 1 }); // the priming event only
      });
    });
  });
});

describe('the per-stream counter migration keeps logged events replayable', () => {
  let db: TestDatabase;
  let ds: DataSource;

  beforeAll(async () => {
    db = await createTestDatabase('sse_migr');
    ds = new DataSource(buildDataSourceOptions({ url: db.url, poolMax: 2, schema: SCHEMA }));
    await ds.initialize();
  });
  afterAll(async () => {
    await ds.destroy();
    await db.drop();
  });

  it('continues each stream above its existing seqs and resumes from an old id', async () => {
    const counterAt = MIGRATIONS.findIndex((m) => m.name.startsWith('SseStreamCounter'));
    expect(counterAt).toBeGreaterThan(0);
    // Bring the schema to just before the counter migration and log events the old way (global seq).
    for (const M of MIGRATIONS.slice(0, counterAt)) {
      const qr = ds.createQueryRunner();
      await new M().up(qr);
      await qr.release();
    }
    await ds.query(
      `INSERT INTO mcp_sse_event (session_id, stream_id, payload) VALUES
         ('s1', 'g', '{"n":"old1"}'), ('s1', 'p1', '{"n":"req"}'), ('s1', 'g', '{"n":"old2"}')`,
    );
    const old = await ds.query<{ seq: string }[]>(
      `SELECT seq FROM mcp_sse_event WHERE stream_id = 'g' ORDER BY seq`,
    );
    const qr = ds.createQueryRunner();
    await new MIGRATIONS[counterAt]().up(qr);
    await qr.release();

    const repo = new SseEventsRepository(ds.getRepository('mcp_sse_event'));
    const fresh = await repo.append('s1', 'g', { n: 'new' });
    expect(Number(fresh)).toBeGreaterThan(Number(old[1].seq));
    // A client holding the id of the first old event resumes with the second old one and the new one.
    const resumed = await repo.readAfter('s1', 'g', String(old[0].seq));
    expect(resumed.map((r) => r.payload)).toEqual([{ n: 'old2' }, { n: 'new' }]);
    expect(await repo.streamHasEvent('s1', 'g', String(old[0].seq))).toBe(true);
  });
});
