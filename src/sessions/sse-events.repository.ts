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

/** Logs one event, numbered by the stream's counter row bumped in the same statement ($1 session, $2 stream). */
const APPEND_EVENT = `WITH counter AS (
    INSERT INTO mcp_sse_stream (session_id, stream_id, last_seq) VALUES ($1, $2, 1)
    ON CONFLICT (session_id, stream_id) DO UPDATE SET last_seq = mcp_sse_stream.last_seq + 1
    RETURNING last_seq)
  INSERT INTO mcp_sse_event (session_id, stream_id, seq, payload, final)
  SELECT $1, $2, counter.last_seq, $3::jsonb, $4::boolean FROM counter
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
   * The same append as an outbox row of `tx`, written in its COMMIT's round trip: the event exists exactly
   * when the transaction commits, numbered by the counter row it locks then. Its seq is not returned.
   */
  appendAtCommit(tx: SqlTx, sessionId: string, streamId: string, payload: Record<string, unknown>): void {
    tx.atCommit(APPEND_EVENT, [sessionId, streamId, JSON.stringify(payload), false]);
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

  async streamHasEvent(sessionId: string, streamId: string, seq: string): Promise<boolean> {
    return this.repo.existsBy({ sessionId, streamId, seq });
  }

  /** Whether a request stream's final event (its response) is at or before `seq`: nothing more will follow. */
  async streamEndedBy(sessionId: string, streamId: string, seq: string): Promise<boolean> {
    const rows = await this.repo.query<unknown[]>(
      'SELECT 1 FROM mcp_sse_event WHERE session_id = $1 AND stream_id = $2 AND final AND seq <= $3 LIMIT 1',
      [sessionId, streamId, seq],
    );
    return rows.length > 0;
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

  /** Deletes the events and the stream counters of sessions that are gone for good. */
  async deleteForSessions(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.repo.createQueryBuilder().delete().where('session_id IN (:...ids)', { ids }).execute();
    // Counters outlive their events otherwise (a resumed stream must keep numbering upwards), so they go
    // only with the session.
    await this.repo.query('DELETE FROM mcp_sse_stream WHERE session_id = ANY($1::text[])', [ids]);
  }
}
