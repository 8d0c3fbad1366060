import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { AuditActorKind, AuditRecord } from './audit.types.js';

/** The most rows one read returns, whatever the caller asks for: pages are walked with the id cursor. */
export const AUDIT_PAGE_MAX = 1000;

/** Which audit rows to read. Every field narrows; none set reads everything, one page at a time. */
export interface AuditFilter {
  /** Rows written at or after this instant. */
  since?: Date;
  /** Rows written before this instant. */
  until?: Date;
  principal?: string;
  tool?: string;
  taskId?: string;
  sessionId?: string;
  /** Any of these kinds. */
  kinds?: readonly string[];
  actor?: AuditActorKind;
  /**
   * The keyset cursor: `newest` pages go on with rows whose id is below `cursor` (the last id of the page
   * before), `oldest` pages (the export) with rows above it. Never OFFSET: every page is an index range.
   */
  cursor?: string;
  order: 'newest' | 'oldest';
  /** Capped at AUDIT_PAGE_MAX. */
  limit: number;
}

interface AuditRow {
  id: string;
  at: Date;
  kind: string;
  actor: AuditActorKind;
  principal: string | null;
  task_id: string | null;
  session_id: string | null;
  tool: string | null;
  era: string | null;
  status: string | null;
  previous_status: string | null;
  attempt: number | null;
  instance_id: string | null;
  trace_id: string | null;
  request_id: string | null;
  detail: Record<string, unknown> | null;
}

function recordOf(r: AuditRow): AuditRecord {
  return {
    id: r.id,
    at: r.at,
    kind: r.kind,
    actor: r.actor,
    principal: r.principal,
    taskId: r.task_id,
    sessionId: r.session_id,
    tool: r.tool,
    era: r.era,
    status: r.status,
    previousStatus: r.previous_status,
    attempt: r.attempt,
    instanceId: r.instance_id,
    traceId: r.trace_id,
    requestId: r.request_id,
    detail: r.detail,
  };
}

/**
 * Reads the audit trail for the CLI (`audit list`, `audit export`) and the console. Pages by id, the
 * table's primary key: a task, principal or tool filter walks its (column, id) index, a time filter the
 * `at` index, so a page costs the same on the first day and after a year of rows.
 */
@Injectable()
export class AuditRepository {
  constructor(private readonly dataSource: DataSource) {}

  async list(filter: AuditFilter): Promise<AuditRecord[]> {
    const where: string[] = [];
    const values: unknown[] = [];
    const add = (sql: string, value: unknown): void => {
      values.push(value);
      where.push(sql.replace('?', `$${values.length}`));
    };
    if (filter.since) add('"at" >= ?', filter.since);
    if (filter.until) add('"at" < ?', filter.until);
    if (filter.principal !== undefined) add('"principal" = ?', filter.principal);
    if (filter.tool !== undefined) add('"tool" = ?', filter.tool);
    if (filter.taskId !== undefined) add('"task_id" = ?', filter.taskId);
    if (filter.sessionId !== undefined) add('"session_id" = ?', filter.sessionId);
    if (filter.kinds !== undefined && filter.kinds.length > 0) add('"kind" = ANY(?::text[])', filter.kinds);
    if (filter.actor !== undefined) add('"actor" = ?', filter.actor);
    const newest = filter.order === 'newest';
    if (filter.cursor !== undefined) add(newest ? '"id" < ?::bigint' : '"id" > ?::bigint', filter.cursor);
    values.push(Math.max(1, Math.min(filter.limit, AUDIT_PAGE_MAX)));
    // The ORDER BY names the table's bigint id: a bare "id" would be the text alias, in string order.
    const rows = await this.dataSource.query<AuditRow[]>(
      `SELECT "id"::text AS id, "at", "kind", "actor", "principal", "task_id", "session_id", "tool", "era",
              "status", "previous_status", "attempt", "instance_id", "trace_id", "request_id", "detail"
         FROM "mcp_audit_event"
        ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY "mcp_audit_event"."id" ${newest ? 'DESC' : 'ASC'}
        LIMIT $${values.length}`,
      values,
    );
    return rows.map(recordOf);
  }
}
