import { Injectable, Logger } from '@nestjs/common';
import { Counter } from 'prom-client';
import { DataSource } from 'typeorm';
import type { SqlRunner, SqlTx } from '../database/sql-transaction.js';
import { InstancesService } from '../instances/instances.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { errorMessage } from '../common/error-message.js';
import { AuditConfig } from './audit.config.js';
import { currentAuditContext } from './audit-context.js';
import type { AuditEvent } from './audit.types.js';

/** The columns AuditTrail writes, in the order of its rows' values. */
const COLUMNS =
  '"kind", "actor", "principal", "task_id", "session_id", "tool", "era", "status", "previous_status", ' +
  '"attempt", "instance_id", "trace_id", "request_id", "detail"';
const COLUMN_COUNT = 14;
/** The placeholders of one row; the last value is JSON text cast to jsonb. */
const ROW_PLACEHOLDERS = (offset: number): string =>
  '(' +
  Array.from(
    { length: COLUMN_COUNT },
    (_, i) => `$${offset + i + 1}${i === COLUMN_COUNT - 1 ? '::jsonb' : ''}`,
  ).join(', ') +
  ')';

type RowValues = Array<string | number | null>;

/**
 * Writes the audit trail. `record` puts an event into the transaction that makes the change it records, so
 * the row commits with the change or not at all: in a task transaction (SqlTx) the rows of the whole
 * transaction go out as one INSERT in the COMMIT's round trip (no extra round trip on the hot path); on a
 * TypeORM manager it is one INSERT there and then. `recordAlone` is for events that change nothing (a
 * refused scope): its own statement, and a failure is logged and counted, never thrown at the caller.
 * With AUDIT_ENABLED=false both do nothing.
 */
@Injectable()
export class AuditTrail {
  private readonly logger = new Logger(AuditTrail.name);
  /** The rows queued in each open task transaction, written by one statement at its COMMIT. */
  private readonly queued = new WeakMap<SqlTx, RowValues[]>();
  private readonly written: Counter<'kind'>;
  private readonly failures: Counter;

  constructor(
    private readonly config: AuditConfig,
    private readonly dataSource: DataSource,
    private readonly instances: InstancesService,
    metrics: MetricsService,
  ) {
    this.written = new Counter({
      name: 'mcp_audit_events_total',
      help: 'Audit rows handed to the database, by kind (a row of a transaction that rolls back is counted too).',
      labelNames: ['kind'],
      registers: [metrics.registry],
    });
    this.failures = new Counter({
      name: 'mcp_audit_write_failures_total',
      help: 'Audit rows of events that change nothing (recordAlone) that could not be written.',
      registers: [metrics.registry],
    });
  }

  get enabled(): boolean {
    return this.config.AUDIT_ENABLED;
  }

  /** Records `event` in the transaction `runner` (see the class comment). */
  async record(runner: SqlTx | SqlRunner, event: AuditEvent): Promise<void> {
    if (!this.config.AUDIT_ENABLED) return;
    const values = this.valuesOf(event);
    this.written.inc({ kind: event.kind });
    if (isSqlTx(runner)) {
      const rows = this.queued.get(runner);
      if (rows) {
        rows.push(values);
        return;
      }
      const fresh = [values];
      this.queued.set(runner, fresh);
      runner.atCommitBuilt(() => this.insertText(runner, fresh));
      return;
    }
    await runner.query(`INSERT INTO "mcp_audit_event" (${COLUMNS}) VALUES ${ROW_PLACEHOLDERS(0)}`, values);
  }

  /** Records an event that changes nothing else, on its own (see the class comment). */
  async recordAlone(event: AuditEvent): Promise<void> {
    if (!this.config.AUDIT_ENABLED) return;
    try {
      await this.record(this.dataSource.manager, event);
    } catch (err) {
      this.failures.inc();
      this.logger.warn(`audit row ${event.kind} not written: ${errorMessage(err)}`);
    }
  }

  private valuesOf(e: AuditEvent): RowValues {
    const ctx = currentAuditContext();
    const detail = { ...(e.detail ?? {}), ...(ctx.actor.via ? { via: ctx.actor.via } : {}) };
    return [
      e.kind,
      e.actor ?? ctx.actor.kind,
      e.principal !== undefined ? e.principal : (ctx.actor.principal ?? null),
      e.taskId ?? null,
      e.sessionId ?? null,
      e.tool ?? null,
      e.era ?? null,
      e.status ?? null,
      e.previousStatus ?? null,
      e.attempt ?? null,
      this.instances.instanceId,
      e.traceId ?? ctx.traceId,
      ctx.requestId,
      Object.keys(detail).length === 0 ? null : JSON.stringify(detail),
    ];
  }

  /** One multi-row INSERT of a transaction's queued rows, as literals (constant SQL, escaped values). */
  private insertText(tx: SqlTx, rows: RowValues[]): string {
    if (rows.length === 0) return '';
    const literal = (v: string | number | null, jsonb: boolean): string => {
      if (v === null) return 'NULL';
      if (typeof v === 'number') return Number.isSafeInteger(v) ? String(v) : 'NULL';
      return jsonb ? `${tx.literal(v)}::jsonb` : tx.literal(v);
    };
    const tuples = rows.map((r) => `(${r.map((v, i) => literal(v, i === COLUMN_COUNT - 1)).join(', ')})`);
    return `INSERT INTO "mcp_audit_event" (${COLUMNS}) VALUES ${tuples.join(', ')}`;
  }
}

function isSqlTx(runner: SqlTx | SqlRunner): runner is SqlTx {
  return typeof (runner as Partial<SqlTx>).atCommitBuilt === 'function';
}
