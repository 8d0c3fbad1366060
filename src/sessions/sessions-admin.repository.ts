import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { McpSession } from './session.entity.js';
import { rowToConsoleSession } from './session-row.mapper.js';

export interface SessionAdminFilter {
  principalId?: string;
  /** Include ended sessions (kept until SSE_EVENT_TTL_MS after their end). */
  includeEnded: boolean;
  limit: number;
}

/** One live session as the console lists it. */
export interface ConsoleSessionRow {
  id: string;
  principalId: string;
  protocolVersion: string;
  clientName: string | null;
  createdAt: Date;
  lastSeenAt: Date;
  /** Event streams of the session with retained events (resumable with Last-Event-ID). */
  eventStreams: number;
}

/** A keyset position in the console's session list (last_seen_at DESC, id DESC). */
export interface ConsoleSessionPosition {
  lastSeenAt: Date;
  id: string;
}

/** Operator reads across all principals, for the admin CLI. Ending a session uses SessionsRepository.end. */
@Injectable()
export class SessionsAdminRepository {
  constructor(private readonly dataSource: DataSource) {}

  /** Most recently used first. */
  async list(filter: SessionAdminFilter): Promise<McpSession[]> {
    const q = this.dataSource.getRepository(McpSession).createQueryBuilder('s');
    if (filter.principalId !== undefined) q.andWhere('s.principal_id = :p', { p: filter.principalId });
    if (!filter.includeEnded) q.andWhere('s.ended_at IS NULL');
    return q.orderBy('s.last_seen_at', 'DESC').addOrderBy('s.id', 'ASC').limit(filter.limit).getMany();
  }

  /**
   * One page of the console's live sessions, most recently used first, after `after`; up to `limit` + 1 rows
   * (the extra one says a next page exists). Keyset, never OFFSET.
   */
  async consoleSessions(
    principalId: string | undefined,
    after: ConsoleSessionPosition | undefined,
    limit: number,
  ): Promise<ConsoleSessionRow[]> {
    const where = ['s.ended_at IS NULL'];
    const params: unknown[] = [];
    const param = (v: unknown): string => {
      params.push(v);
      return `$${params.length}`;
    };
    if (principalId !== undefined) where.push(`s.principal_id = ${param(principalId)}`);
    if (after) where.push(`(s.last_seen_at, s.id) < (${param(after.lastSeenAt)}, ${param(after.id)})`);
    const rows = await this.dataSource.query<Record<string, unknown>[]>(
      `SELECT s.id, s.principal_id, s.protocol_version, s.client_info->>'name' AS client_name, s.created_at,
              s.last_seen_at,
              (SELECT count(*) FROM mcp_sse_stream st WHERE st.session_id = s.id AND st.last_seq > 0) AS event_streams
         FROM mcp_session s WHERE ${where.join(' AND ')}
        ORDER BY s.last_seen_at DESC, s.id DESC LIMIT ${param(limit + 1)}`,
      params,
    );
    return rows.map(rowToConsoleSession);
  }
}
