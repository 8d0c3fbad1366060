import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import type { Repository } from 'typeorm';
import { ClientResponse } from './client-response.entity.js';

/** What became of a client's answer offered for parking. */
export type ParkVerdict =
  | { kind: 'parked' }
  /** Nothing in the session awaits it: never sent, already answered, or past its timeout. */
  | { kind: 'not_awaited' }
  /** It would take the session's parked answers past the limit; `stored` is what they hold now. */
  | { kind: 'over_quota'; stored: number };

@Injectable()
export class ClientResponsesRepository {
  constructor(@InjectRepository(ClientResponse) private readonly repo: Repository<ClientResponse>) {}

  /** Records a request as sent, before the client can see it, so that any instance may take its answer. */
  async expect(sessionId: string, requestId: string): Promise<void> {
    await this.repo.query(
      `INSERT INTO mcp_client_response (session_id, request_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
      [sessionId, requestId],
    );
  }

  /**
   * Stores the answer to an outstanding request, once, if the session's parked answers then hold at most
   * `limitBytes`. The session's rows are locked (in key order) for the check, so concurrent answers to the
   * same session count each other; rows are few (one per request the session has outstanding).
   */
  async park(
    sessionId: string,
    requestId: string,
    payload: Record<string, unknown>,
    bytes: number,
    limitBytes: number,
    timeoutMs: number,
  ): Promise<ParkVerdict> {
    const rows = await this.repo.query<{ awaited: boolean | null; stored: string; parked: boolean }[]>(
      `WITH held AS (
         SELECT request_id, payload IS NULL AS open, created_at, payload_bytes FROM mcp_client_response
         WHERE session_id = $1 ORDER BY request_id FOR UPDATE
       ), target AS (
         SELECT open AND created_at > now() - make_interval(secs => $6::float8 / 1000) AS awaited
         FROM held WHERE request_id = $2
       ), stored AS (
         SELECT coalesce(sum(payload_bytes), 0)::int8 AS bytes FROM held
       ), parked AS (
         UPDATE mcp_client_response SET payload = $3, payload_bytes = $4
         WHERE session_id = $1 AND request_id = $2
           AND coalesce((SELECT awaited FROM target), false)
           AND (SELECT bytes FROM stored) + $4 <= $5
         RETURNING 1
       )
       SELECT (SELECT awaited FROM target) AS awaited, (SELECT bytes FROM stored) AS stored,
              EXISTS (SELECT 1 FROM parked) AS parked`,
      [sessionId, requestId, JSON.stringify(payload), bytes, limitBytes, timeoutMs],
    );
    const row = rows[0];
    if (row.parked) return { kind: 'parked' };
    if (!row.awaited) return { kind: 'not_awaited' };
    return { kind: 'over_quota', stored: Number(row.stored) };
  }

  /** Removes and returns the parked answer, so exactly one waiter consumes it (undefined while outstanding). */
  async take(sessionId: string, requestId: string): Promise<Record<string, unknown> | undefined> {
    const rows = await this.repo.query<[{ payload: Record<string, unknown> }[], number]>(
      `DELETE FROM mcp_client_response WHERE session_id = $1 AND request_id = $2 AND payload IS NOT NULL
       RETURNING payload`,
      [sessionId, requestId],
    );
    return rows[0]?.[0]?.payload;
  }

  /** The request ended without its answer being taken (answered here, timed out, aborted). */
  async forget(sessionId: string, requestId: string): Promise<void> {
    await this.repo.query('DELETE FROM mcp_client_response WHERE session_id = $1 AND request_id = $2', [
      sessionId,
      requestId,
    ]);
  }

  async deleteOlderThan(cutoff: Date): Promise<void> {
    await this.repo.createQueryBuilder().delete().where('created_at < :cutoff', { cutoff }).execute();
  }
}
