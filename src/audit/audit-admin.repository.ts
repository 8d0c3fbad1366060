import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { AuditActorKind, AuditRecord } from './audit.types.js';

const COLUMNS = `id, at, kind, actor, principal, task_id, session_id, tool, era, status, previous_status, attempt,
       instance_id, trace_id, request_id, detail`;

function toRecord(r: Record<string, unknown>): AuditRecord {
  return {
    id: String(r.id),
    at: r.at as Date,
    kind: r.kind as string,
    actor: r.actor as AuditActorKind,
    principal: (r.principal as string | null) ?? null,
    taskId: (r.task_id as string | null) ?? null,
    sessionId: (r.session_id as string | null) ?? null,
    tool: (r.tool as string | null) ?? null,
    era: (r.era as string | null) ?? null,
    status: (r.status as string | null) ?? null,
    previousStatus: (r.previous_status as string | null) ?? null,
    attempt: r.attempt === null || r.attempt === undefined ? null : Number(r.attempt),
    instanceId: (r.instance_id as string | null) ?? null,
    traceId: (r.trace_id as string | null) ?? null,
    requestId: (r.request_id as string | null) ?? null,
    detail: (r.detail as Record<string, unknown> | null) ?? null,
  };
}

/** The console's reads of the audit trail (a task's timeline), each bounded and index-backed. */
@Injectable()
export class AuditAdminRepository {
  constructor(private readonly dataSource: DataSource) {}

  /** A task's events in the order they were written, at most `limit` (audit_event_task_idx). */
  async taskTimeline(taskId: string, limit: number): Promise<AuditRecord[]> {
    const rows = await this.dataSource.query<Record<string, unknown>[]>(
      `SELECT ${COLUMNS} FROM mcp_audit_event WHERE task_id = $1 ORDER BY id LIMIT $2`,
      [taskId, limit],
    );
    return rows.map(toRecord);
  }
}
