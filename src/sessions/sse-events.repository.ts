import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import type { Repository } from 'typeorm';
import type { SqlRunner, SqlTx } from '../database/sql-transaction.js';
import { SseEvent } from './sse-event.entity.js';

export interface LoggedEvent {
  seq: string;
  payload: Record<string, unknown> | null;
  final: boolean;
  /** When the event was committed to the log (database clock). */
  createdAt: Date;
}

export type ResumePoint =
  | { issued: false }
  | {
      issued: true;
      lastSeq: string;
      firstAfter: string | null;
      ended: boolean;
      /** Events after the resume point that are no longer logged (the client never saw them). */
      missed: number;
    };

/** Logs one event, numbered by the stream's counter row bumped in the same statement ($1 session, $2 stream). */
const APPEND_EVENT = `WITH counter AS (
    INSERT INTO mcp_sse_stream (session_id, stream_id, last_seq) VALUES ($1, $2, 1)
    ON CONFLICT (session_id, stream_id) DO UPDATE SET last_seq = mcp_sse_stream.last_seq + 1
    RETURNING last_seq)
  INSERT INTO mcp_sse_event (session_id, stream_id, seq, payload, final)
  SELECT $1, $2, counter.last_seq, $3::jsonb, $4::boolean FROM counter
  RETURNING seq`;

/**
 * The outbox append ($1 session, $2 stream, $3 payload, $4 final). Two differences from APPEND_EVENT:
 * - Only while the session row exists. The check takes no lock (it must not make a task commit wait for the
 *   sweep), so an append racing the session's deletion can still leave a counter row; deleteOrphanCounters
 *   sweeps those.
 * - Only once the stream has issued an id. A fresh GET stream starts after its priming event (APPEND_EVENT),
 *   so an event logged before a stream's first id could never be sent to anyone: the legacy status outbox of
 *   a session that only polls wrote a row per status change for nothing. Such a stream's counter row stays
 *   at 0 (made at 0 when missing) and no event is logged. The conflict arm locks the counter row even when
 *   its WHERE leaves it unchanged, so this append and a priming one still run one after the other: an
 *   append that waited for a priming commit sees the new counter and logs its event after the priming id;
 *   a priming that waited for this transaction numbers itself after a change it was never owed.
 */
const APPEND_EVENT_AT_COMMIT = `WITH counter AS (
    INSERT INTO mcp_sse_stream (session_id, stream_id, last_seq)
      SELECT $1, $2, 0 WHERE EXISTS (SELECT 1 FROM mcp_session WHERE id = $1)
    ON CONFLICT (session_id, stream_id) DO UPDATE SET last_seq = mcp_sse_stream.last_seq + 1
      WHERE mcp_sse_stream.last_seq > 0
    RETURNING last_seq)
  INSERT INTO mcp_sse_event (session_id, stream_id, seq, payload, final)
  SELECT $1, $2, counter.last_seq, $3::jsonb, $4::boolean FROM counter WHERE counter.last_seq > 0
  RETURNING seq`;

@Injectable()
export class SseEventsRepository {
  constructor(@InjectRepository(SseEvent) private readonly repo: Repository<SseEvent>) {}

  /**
   * Logs one event and returns its seq: the stream's counter bumped in the same statement, so the counter
   * row stays locked until the event commits and the next event of the stream gets the next number only
   * after that. Given a transaction's manager, the event commits (and is numbered) with that transaction.
   */
  async append(
    sessionId: string,
    streamId: string,
    payload: Record<string, unknown> | null,
    final = false,
    manager?: SqlRunner,
  ): Promise<string> {
    const runner: SqlRunner = manager ?? this.repo.manager;
    const rows = (await runner.query(APPEND_EVENT, [
      sessionId,
      streamId,
      payload === null ? null : JSON.stringify(payload),
      final,
    ])) as { seq: string }[];
    return String(rows[0].seq);
  }

  /**
   * The same append as an outbox row of `tx`, written in its COMMIT's round trip: once the stream has issued
   * an id, the event exists exactly when the transaction commits, numbered by the counter row it locks then;
   * before that nothing is logged, since no stream could ever send it (APPEND_EVENT_AT_COMMIT). Its seq is
   * not returned. A task outlives its session: once the session row is deleted nothing is logged (nobody can
   * resume it), so no counter row is made again for a session no sweep would look at.
   */
  appendAtCommit(tx: SqlTx, sessionId: string, streamId: string, payload: Record<string, unknown>): void {
    tx.atCommit(APPEND_EVENT_AT_COMMIT, [sessionId, streamId, JSON.stringify(payload), false]);
  }

  async readAfter(
    sessionId: string,
    streamId: string,
    afterSeq: string,
    limit = 500,
  ): Promise<LoggedEvent[]> {
    const rows = await this.repo
      .createQueryBuilder('e')
      .select(['e.seq', 'e.payload', 'e.final', 'e.createdAt'])
      .where('e.session_id = :sessionId AND e.stream_id = :streamId AND e.seq > :afterSeq', {
        sessionId,
        streamId,
        afterSeq,
      })
      .orderBy('e.seq', 'ASC')
      .limit(limit)
      .getMany();
    return rows.map((r) => ({
      seq: String(r.seq),
      payload: r.payload,
      final: r.final,
      createdAt: r.createdAt,
    }));
  }

  /**
   * Where a resume after `seq` stands, judged by the stream's counter (which outlives pruned events) rather
   * than by the named event's row: `issued` says the stream numbered that far, `firstAfter` is the oldest event
   * still logged after it, `ended` that a request stream's final event is at or before it. Events are removed
   * oldest first (retention, age), so while the named event is logged everything after it is too (this also
   * covers streams numbered from the old global sequence, whose seqs have gaps); once it is gone, the events
   * after it are complete only if the oldest one left is the very next number.
   */
  async resumePoint(sessionId: string, streamId: string, seq: string): Promise<ResumePoint> {
    const [row] = await this.repo.query<
      { last_seq: string; first_after: string | null; ended: boolean; named: boolean }[]
    >(
      `SELECT s.last_seq,
              EXISTS (SELECT 1 FROM mcp_sse_event e
                WHERE e.session_id = $1 AND e.stream_id = $2 AND e.seq = $3) AS named,
              (SELECT min(e.seq) FROM mcp_sse_event e
                WHERE e.session_id = $1 AND e.stream_id = $2 AND e.seq > $3) AS first_after,
              EXISTS (SELECT 1 FROM mcp_sse_event e
                WHERE e.session_id = $1 AND e.stream_id = $2 AND e.final AND e.seq <= $3) AS ended
         FROM mcp_sse_stream s WHERE s.session_id = $1 AND s.stream_id = $2`,
      [sessionId, streamId, seq],
    );
    // A counter at 0 has issued no id yet (only outbox appends, which log nothing before the first id).
    if (!row || BigInt(row.last_seq) === 0n || BigInt(row.last_seq) < BigInt(seq)) return { issued: false };
    const lastSeq = String(row.last_seq);
    const firstAfter = row.first_after === null ? null : String(row.first_after);
    const next = BigInt(seq) + 1n;
    // Missed: the stream went on after `seq`, but the event right after it is no longer logged.
    const missed =
      !row.named && BigInt(lastSeq) > BigInt(seq) && (firstAfter === null || BigInt(firstAfter) > next)
        ? (firstAfter === null ? BigInt(lastSeq) : BigInt(firstAfter) - 1n) - BigInt(seq)
        : 0n;
    return { issued: true, lastSeq, firstAfter, ended: row.ended, missed: Number(missed) };
  }

  async streamHasEvent(sessionId: string, streamId: string, seq: string): Promise<boolean> {
    return this.repo.existsBy({ sessionId, streamId, seq });
  }

  /** Keeps the newest `keep` events of a stream. */
  async pruneStream(sessionId: string, streamId: string, keep: number): Promise<void> {
    await this.repo.query(
      `DELETE FROM mcp_sse_event WHERE session_id = $1 AND stream_id = $2 AND seq <= (
         SELECT seq FROM mcp_sse_event WHERE session_id = $1 AND stream_id = $2 ORDER BY seq DESC OFFSET $3 LIMIT 1)`,
      [sessionId, streamId, keep],
    );
  }

  async deleteOlderThan(cutoff: Date): Promise<number> {
    const res = await this.repo
      .createQueryBuilder()
      .delete()
      .where('created_at < :cutoff', { cutoff })
      .execute();
    return res.affected ?? 0;
  }

  /**
   * Deletes stream counters (and any events) whose session row is gone: left by an outbox append that raced
   * the session's deletion. At most `limit` per call; returns how many counters went.
   */
  async deleteOrphanCounters(limit = 1000): Promise<number> {
    const rows = await this.repo.query<[{ session_id: string }[], number]>(
      `DELETE FROM mcp_sse_stream WHERE (session_id, stream_id) IN (
         SELECT s.session_id, s.stream_id FROM mcp_sse_stream s
          WHERE NOT EXISTS (SELECT 1 FROM mcp_session m WHERE m.id = s.session_id) LIMIT $1)
       RETURNING session_id`,
      [limit],
    );
    const ids = [...new Set(rows[0].map((r) => r.session_id))];
    if (ids.length > 0) {
      await this.repo.query(
        `DELETE FROM mcp_sse_event e WHERE e.session_id = ANY($1::text[])
            AND NOT EXISTS (SELECT 1 FROM mcp_session m WHERE m.id = e.session_id)`,
        [ids],
      );
    }
    return rows[0].length;
  }

  /** Deletes the events and the stream counters of sessions that are gone for good. */
  async deleteForSessions(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.repo.createQueryBuilder().delete().where('session_id IN (:...ids)', { ids }).execute();
    // Counters outlive their events otherwise (a resumed stream must keep numbering upwards), so they go
    // only with the session.
    await this.repo.query('DELETE FROM mcp_sse_stream WHERE session_id = ANY($1::text[])', [ids]);
  }
}
