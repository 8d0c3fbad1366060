import type { Context } from '@opentelemetry/api';
import { logs, SeverityNumber, type LogAttributes } from '@opentelemetry/api-logs';
import type { AuditRecord } from './audit.types.js';

/** The instrumentation scope of the audit trail's log records (a collector routes on it). */
export const AUDIT_LOGGER_NAME = 'mcp-task-server.audit';

/** One written audit row as a log record sees it: the export's fields without id and at (not known here). */
export interface AuditLogRow extends Omit<AuditRecord, 'id' | 'at' | 'actor' | 'detail'> {
  actor: string;
  /** JSON text, as written to the jsonb column. */
  detail: string | null;
  /** When the event was recorded (epoch ms, this process's clock). */
  atMs: number;
  /** The OpenTelemetry context the event was recorded in: the record links to that trace and span. */
  context: Context;
}

/** Attribute names: `mcp.audit.` + the column name, so a SIEM maps them once for both export paths. */
const ATTRIBUTES: ReadonlyArray<[keyof AuditLogRow, string]> = [
  ['kind', 'mcp.audit.kind'],
  ['actor', 'mcp.audit.actor'],
  ['principal', 'mcp.audit.principal'],
  ['taskId', 'mcp.audit.task_id'],
  ['sessionId', 'mcp.audit.session_id'],
  ['tool', 'mcp.audit.tool'],
  ['era', 'mcp.audit.era'],
  ['status', 'mcp.audit.status'],
  ['previousStatus', 'mcp.audit.previous_status'],
  ['attempt', 'mcp.audit.attempt'],
  ['instanceId', 'mcp.audit.instance_id'],
  ['requestId', 'mcp.audit.request_id'],
  ['detail', 'mcp.audit.detail'],
];

/**
 * Emits each row as an OpenTelemetry log record through the global logger provider, which the SDK sets up
 * when tracing is on (tracing-sdk.ts; OTEL_LOGS_EXPORTER picks the exporter). Called only after the rows
 * committed. Emitting hands the record to the SDK's batch processor: no I/O here, and nothing thrown.
 */
export function emitAuditLogRecords(rows: readonly AuditLogRow[]): void {
  const logger = logs.getLogger(AUDIT_LOGGER_NAME);
  for (const row of rows) {
    const attributes: LogAttributes = {};
    for (const [field, name] of ATTRIBUTES) {
      const value = row[field];
      if (value !== null) attributes[name] = value as string | number;
    }
    try {
      logger.emit({
        eventName: `mcp.audit.${row.kind}`,
        timestamp: row.atMs,
        severityNumber: SeverityNumber.INFO,
        severityText: 'INFO',
        body: `${row.kind} by ${row.actor}${row.principal ? ` ${row.principal}` : ''}`,
        attributes,
        context: row.context,
      });
    } catch {
      // A broken exporter must never reach the code that changed a task; the row is in PostgreSQL anyway.
    }
  }
}
