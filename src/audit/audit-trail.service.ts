import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { context as otelContext } from '@opentelemetry/api';
import { Counter } from 'prom-client';
import {
  DataSource,
  type EntityManager,
  type EntitySubscriberInterface,
  type QueryRunner,
  type TransactionCommitEvent,
  type TransactionRollbackEvent,
} from 'typeorm';
import type { SqlRunner, SqlTx } from '../database/sql-transaction.js';
import { InstancesService } from '../instances/instances.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { errorMessage } from '../common/error-message.js';
import { TelemetryConfig } from '../telemetry/telemetry.config.js';
import { AuditConfig } from './audit.config.js';
import { currentAuditContext, type AuditContext } from './audit-context.js';
import { emitAuditLogRecords, type AuditLogRow } from './audit-log-records.js';
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

/** Where rows are written from: a server instance, or nothing (the CLI passes `{ instanceId: null }`). */
export interface AuditOrigin {
  readonly instanceId: string | null;
}

/**
 * Refusals waiting for the one INSERT in flight (recordSoon). Past this many, further refusals are counted
 * in mcp_audit_dropped_total and not written: a flood of bad requests must not grow memory without end.
 */
const SOON_MAX_PENDING = 1000;

/** The log record of a row whose values are `v` (in COLUMNS order), recorded at `atMs` in `context`. */
function logRowOf(v: RowValues, atMs: number, context: AuditLogRow['context']): AuditLogRow {
  const text = (i: number): string | null => v[i] as string | null;
  return {
    kind: v[0] as string,
    actor: v[1] as string,
    principal: text(2),
    taskId: text(3),
    sessionId: text(4),
    tool: text(5),
    era: text(6),
    status: text(7),
    previousStatus: text(8),
    attempt: v[9] as number | null,
    instanceId: text(10),
    traceId: text(11),
    requestId: text(12),
    detail: text(13),
    atMs,
    context,
  };
}

/**
 * Writes the audit trail. `record` puts an event into the transaction that makes the change it records, so
 * the row commits with the change or not at all: in a task transaction (SqlTx) the rows of the whole
 * transaction go out as one INSERT in the COMMIT's round trip (no extra round trip on the hot path); on a
 * TypeORM manager it is one INSERT there and then. `recordAlone` is for events that change nothing (a
 * refused scope): its own statement, and a failure is logged and counted, never thrown at the caller.
 * `recordSoon` is recordAlone for events a caller can trigger in bulk (a refused scope): not awaited, and
 * at most one INSERT in flight, carrying every refusal that arrived meanwhile (see SOON_MAX_PENDING).
 * With AUDIT_ENABLED=false all three do nothing.
 *
 * When tracing is on, each row is also emitted as an OpenTelemetry log record, once it committed: after
 * the SqlTx's COMMIT, after the TypeORM transaction's commit (a subscriber on the data source), or right
 * after the INSERT outside a transaction.
 */
@Injectable()
export class AuditTrail implements OnApplicationShutdown {
  private readonly logger = new Logger(AuditTrail.name);
  /** The rows queued in each open task transaction, written by one statement at its COMMIT. */
  private readonly queued = new WeakMap<SqlTx, RowValues[]>();
  /** Log records of each open task transaction, emitted after its COMMIT. */
  private readonly txLogs = new WeakMap<SqlTx, AuditLogRow[]>();
  /** Log records waiting for the commit of the TypeORM transaction that wrote their rows. */
  private readonly uncommitted = new WeakMap<QueryRunner, AuditLogRow[]>();
  private readonly written: Counter<'kind'>;
  private readonly byKind = new Map<string, Counter.Internal>();
  private readonly failures: Counter;
  private readonly dropped: Counter;
  private readonly emitting: boolean;
  /** recordSoon's rows not yet handed to an INSERT, and the INSERT in flight. */
  private soon: Array<{ values: RowValues; log: AuditLogRow | null }> = [];
  private soonFlight: Promise<void> | null = null;

  constructor(
    private readonly config: AuditConfig,
    private readonly dataSource: DataSource,
    @Inject(InstancesService) private readonly origin: AuditOrigin,
    metrics: MetricsService,
    telemetry: TelemetryConfig,
  ) {
    this.emitting = config.AUDIT_ENABLED && telemetry.tracingEnabled;
    if (this.emitting) this.dataSource.subscribers.push(this.commitListener());
    this.written = new Counter({
      name: 'mcp_audit_events_total',
      help: 'Audit rows handed to the database, by kind (a row of a transaction that rolls back is counted too).',
      labelNames: ['kind'],
      registers: [metrics.registry],
    });
    this.failures = new Counter({
      name: 'mcp_audit_write_failures_total',
      help: 'Audit rows of events that change nothing (recordAlone, recordSoon) that could not be written.',
      registers: [metrics.registry],
    });
    this.dropped = new Counter({
      name: 'mcp_audit_dropped_total',
      help:
        'Audit rows of refusals (recordSoon) not written because more than 1000 were already waiting for ' +
        'the INSERT in flight: a flood of refused requests.',
      registers: [metrics.registry],
    });
  }

  async onApplicationShutdown(): Promise<void> {
    // Refusals still queued are written before the pool closes.
    while (this.soonFlight) await this.soonFlight;
  }

  get enabled(): boolean {
    return this.config.AUDIT_ENABLED;
  }

  /** Records `event` in the transaction `runner` (see the class comment). */
  async record(runner: SqlTx | SqlRunner, event: AuditEvent): Promise<void> {
    if (!this.config.AUDIT_ENABLED) return;
    if (isSqlTx(runner)) {
      this.queue(runner, event);
      return;
    }
    const values = this.valuesOf(event, currentAuditContext());
    this.count(event.kind);
    await runner.query(`INSERT INTO "mcp_audit_event" (${COLUMNS}) VALUES ${ROW_PLACEHOLDERS(0)}`, values);
    if (this.emitting) this.afterManagerCommit(runner, [logRowOf(values, Date.now(), otelContext.active())]);
  }

  /**
   * `record` for a task transaction, without a promise: the row joins the one INSERT sent with `tx`'s COMMIT.
   * The task paths call it for every change, so it allocates nothing it does not write; `ctx` is the audit
   * context the caller already read (else the current one).
   */
  queue(tx: SqlTx, event: AuditEvent, ctx: AuditContext = currentAuditContext()): void {
    if (!this.config.AUDIT_ENABLED) return;
    const values = this.valuesOf(event, ctx);
    this.count(event.kind);
    const rows = this.queued.get(tx);
    if (rows) rows.push(values);
    else {
      const fresh = [values];
      this.queued.set(tx, fresh);
      tx.atCommitBuilt(() => this.insertText(tx, fresh));
    }
    if (!this.emitting) return;
    const log = logRowOf(values, Date.now(), otelContext.active());
    const logRows = this.txLogs.get(tx);
    if (logRows) logRows.push(log);
    else {
      const fresh = [log];
      this.txLogs.set(tx, fresh);
      tx.afterCommit(() => emitAuditLogRecords(fresh));
    }
  }

  /** mcp_audit_events_total{kind}: the labelled child of each kind looked up once, not hashed per row. */
  private count(kind: string): void {
    let child = this.byKind.get(kind);
    if (!child) {
      child = this.written.labels(kind);
      this.byKind.set(kind, child);
    }
    child.inc();
  }

  /**
   * recordAlone without waiting, and bounded (see the class comment): for events a client can cause as
   * often as it likes. Never throws; a failed INSERT is logged and counted like recordAlone's.
   */
  recordSoon(event: AuditEvent): void {
    if (!this.config.AUDIT_ENABLED) return;
    if (this.soon.length >= SOON_MAX_PENDING) {
      this.dropped.inc();
      return;
    }
    const values = this.valuesOf(event, currentAuditContext());
    this.count(event.kind);
    this.soon.push({
      values,
      log: this.emitting ? logRowOf(values, Date.now(), otelContext.active()) : null,
    });
    if (!this.soonFlight) this.soonFlight = this.flushSoon();
  }

  /** One INSERT per round: whatever queued while the previous one ran goes in the next. */
  private async flushSoon(): Promise<void> {
    try {
      while (this.soon.length > 0) {
        const batch = this.soon;
        this.soon = [];
        const placeholders = batch.map((_, i) => ROW_PLACEHOLDERS(i * COLUMN_COUNT)).join(', ');
        try {
          await this.dataSource.query(
            `INSERT INTO "mcp_audit_event" (${COLUMNS}) VALUES ${placeholders}`,
            batch.flatMap((r) => r.values),
          );
          const logRows = batch.flatMap((r) => (r.log ? [r.log] : []));
          if (logRows.length > 0) emitAuditLogRecords(logRows);
        } catch (err) {
          this.failures.inc(batch.length);
          this.logger.warn(`${batch.length} audit row(s) of refusals not written: ${errorMessage(err)}`);
        }
      }
    } finally {
      this.soonFlight = null;
    }
  }

  /** Emits now outside a transaction; else when the manager's transaction commits (dropped on rollback). */
  private afterManagerCommit(runner: SqlRunner, rows: AuditLogRow[]): void {
    const qr = (runner as Partial<EntityManager>).queryRunner;
    if (!qr || !qr.isTransactionActive) {
      emitAuditLogRecords(rows);
      return;
    }
    const waiting = this.uncommitted.get(qr);
    if (waiting) waiting.push(...rows);
    else this.uncommitted.set(qr, rows);
  }

  /** The data source subscriber that releases a TypeORM transaction's log records at its commit. */
  private commitListener(): EntitySubscriberInterface {
    const settle = (qr: QueryRunner, commit: boolean): void => {
      // A savepoint's release also reports a commit: only the outermost one is the transaction's.
      if (qr.isTransactionActive) return;
      const rows = this.uncommitted.get(qr);
      if (!rows) return;
      this.uncommitted.delete(qr);
      if (commit) emitAuditLogRecords(rows);
    };
    return {
      afterTransactionCommit: (e: TransactionCommitEvent) => settle(e.queryRunner, true),
      afterTransactionRollback: (e: TransactionRollbackEvent) => settle(e.queryRunner, false),
    };
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

  private valuesOf(e: AuditEvent, ctx: AuditContext): RowValues {
    const via = ctx.actor.via;
    const detail = via ? { ...e.detail, via } : e.detail;
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
      this.origin.instanceId,
      e.traceId ?? ctx.traceId,
      ctx.requestId,
      !detail || Object.keys(detail).length === 0 ? null : JSON.stringify(detail),
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
