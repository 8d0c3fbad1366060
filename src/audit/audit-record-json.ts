import type { AuditRecord } from './audit.types.js';

/**
 * An audit row as the CLI prints it and the export writes it, one JSON object per row. These field names
 * are an interface (SIEM parsers, alert rules): add fields, never rename or drop one.
 */
export function auditRecordJson(r: AuditRecord): Record<string, unknown> {
  return {
    id: r.id,
    at: r.at.toISOString(),
    kind: r.kind,
    actor: r.actor,
    principal: r.principal,
    taskId: r.taskId,
    sessionId: r.sessionId,
    tool: r.tool,
    era: r.era,
    status: r.status,
    previousStatus: r.previousStatus,
    attempt: r.attempt,
    instanceId: r.instanceId,
    traceId: r.traceId,
    requestId: r.requestId,
    detail: r.detail,
  };
}
