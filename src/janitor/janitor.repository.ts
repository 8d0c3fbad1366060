import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { AdvisoryLockKey } from '../database/advisory-locks.js';
import type { SqlTx } from '../database/sql-transaction.js';
import { EXPIRED } from '../tasks/task-failures.js';
import { TaskAuditWriter } from '../tasks/store/task-audit-writer.js';
import { TaskRowWriter, type SweptTask } from '../tasks/store/task-row-writer.js';
import { planRescue } from './janitor-rescue.js';
import { LIVE_SQL, returned, TERMINAL_SQL, toNumber, type Row } from '../tasks/store/task-row.mapper.js';
import type { TaskStatus } from '../tasks/task-state.js';
import type { StoredTraceContext } from '../telemetry/trace-context.js';
import { TaskTransactions } from '../tasks/store/task-transactions.js';

export type JanitorStep = 'expire' | 'lease_lapsed' | 'instance_gone' | 'delete';

function toSwept(r: Row): SweptTask {
  return {
    id: r.id as string,
    toolName: r.tool_name as string,
    status: r.status as TaskStatus,
    createdAt: r.created_at as Date,
    traceContext: (r.trace_context as StoredTraceContext | null) ?? null,
  };
}

/**
 * The janitor's queries on the task table (JanitorService): the sweep's bounded batches under the janitor's
 * advisory lock, startup recovery, and its lag gauge. Batches fail (TaskRowWriter.failRows) or rescue
 * (TaskRowWriter.rescueRows) rows through the shared row writes, so each change is published like any other.
 * A rescued task that is re-queued stays `working` (the SweptTask says so); planRescue decides.
 */
@Injectable()
export class JanitorRepository {
  constructor(
    private readonly dataSource: DataSource,
    private readonly transactions: TaskTransactions,
    private readonly writer: TaskRowWriter,
    private readonly audit: TaskAuditWriter,
  ) {}

  /**
   * How far behind the janitor is, in seconds (0 when nothing is due): `expire`, since the oldest live task
   * passed its ttl; `delete`, since the oldest finished task passed ttl + grace. Both are ranges of
   * task_expires_idx: the grace is subtracted from now(), never added to the column, which would make the
   * planner read the whole index (0.6 s at 1M rows when nothing is due, on every scrape and console view).
   */
  async janitorLag(graceMs: number): Promise<{ expire: number; delete: number }> {
    const [r] = await this.dataSource.query<Row[]>(
      `SELECT
         COALESCE(EXTRACT(EPOCH FROM now() - (SELECT min(expires_at) FROM task
            WHERE status IN ${LIVE_SQL} AND expires_at <= now())), 0) AS expire,
         COALESCE(EXTRACT(EPOCH FROM now() - (SELECT min(expires_at) + $1::int * interval '1 millisecond'
            FROM task WHERE status IN ${TERMINAL_SQL}
              AND expires_at <= now() - $1::int * interval '1 millisecond')), 0) AS delete`,
      [graceMs],
    );
    return { expire: toNumber(r.expire), delete: toNumber(r.delete) };
  }

  /**
   * One bounded janitor batch, in its own transaction, under the janitor's transaction-scoped advisory
   * lock. Returns null when another instance holds the lock (this run stops), else the rows handled.
   * Rows are claimed with FOR UPDATE SKIP LOCKED, so a batch never waits behind live traffic.
   */
  async janitorBatch(
    step: JanitorStep,
    opts: { batchSize: number; graceMs: number; selfInstanceId: string; staleInstanceMs: number },
  ): Promise<SweptTask[] | null> {
    return this.transactions.tx(async (m) => {
      const [{ ok }] = await m.query<Row>('SELECT pg_try_advisory_xact_lock($1) AS ok', [
        AdvisoryLockKey.Janitor,
      ]);
      if (ok !== true) return null;
      if (step === 'delete') {
        // A range of task_expires_idx (grace off now(), as in janitorLag): a run with nothing due reads nothing.
        const rows = returned(
          await m.query(
            `DELETE FROM task WHERE id IN (
             SELECT id FROM task
             WHERE status IN ${TERMINAL_SQL} AND expires_at <= now() - $2::int * interval '1 millisecond'
             ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
           RETURNING id, owner_id, session_id, era, tool_name, status, attempt, created_at, trace_context`,
            [opts.batchSize, opts.graceMs],
          ),
        );
        // The last trace of a task: once its row is gone, only the audit trail says it existed.
        this.audit.deleted(
          m,
          rows.map((r) => ({
            id: r.id as string,
            ownerId: r.owner_id as string,
            sessionId: (r.session_id as string | null) ?? null,
            era: r.era as string,
            toolName: r.tool_name as string,
            status: r.status as TaskStatus,
            attempt: toNumber(r.attempt),
            createdAt: r.created_at as Date,
          })),
        );
        return rows.map(toSwept);
      }
      return this.failBatch(m, step, opts);
    }, true);
  }

  /**
   * One bounded batch of the audit retention: deletes up to `batchSize` of the oldest audit rows older than
   * `retentionDays` (by `at`, on its index), under the janitor's advisory lock like the task steps. Null
   * when another instance holds the lock, else how many rows went.
   */
  async deleteAuditBatch(retentionDays: number, batchSize: number): Promise<number | null> {
    return this.transactions.tx(async (m) => {
      const [{ ok }] = await m.query<Row>('SELECT pg_try_advisory_xact_lock($1) AS ok', [
        AdvisoryLockKey.Janitor,
      ]);
      if (ok !== true) return null;
      const [{ n }] = await m.query<Row>(
        `WITH gone AS (
           DELETE FROM mcp_audit_event WHERE id IN (
             SELECT id FROM mcp_audit_event WHERE at < now() - $1::int * interval '1 day'
             ORDER BY at LIMIT $2)
           RETURNING 1)
         SELECT count(*)::int AS n FROM gone`,
        [retentionDays, batchSize],
      );
      return toNumber(n);
    });
  }

  /**
   * One bounded batch of instance bookkeeping under the janitor's advisory lock. `lapse`: instances silent
   * for `staleInstanceMs` (killed, or cut off) are marked stopped as of their last heartbeat, so the console
   * and `instances list` stop showing them as up (a process that was only cut off clears the mark with its
   * next heartbeat). `prune`: rows stopped more than `retentionHours` ago are deleted, oldest first (a task
   * still naming a deleted instance is rescued like one held by a stopped instance). Null when another
   * instance holds the lock, else how many rows changed.
   */
  async instanceBatch(
    step: 'lapse' | 'prune',
    opts: { batchSize: number; selfInstanceId: string; staleInstanceMs: number; retentionHours: number },
  ): Promise<number | null> {
    return this.transactions.tx(async (m) => {
      const [{ ok }] = await m.query<Row>('SELECT pg_try_advisory_xact_lock($1) AS ok', [
        AdvisoryLockKey.Janitor,
      ]);
      if (ok !== true) return null;
      const [{ n }] =
        step === 'lapse'
          ? await m.query<Row>(
              `WITH gone AS (
                 UPDATE service_instance SET stopped_at = heartbeat_at WHERE id IN (
                   SELECT id FROM service_instance
                   WHERE stopped_at IS NULL AND id <> $2
                     AND heartbeat_at < now() - $3::int * interval '1 millisecond'
                   ORDER BY heartbeat_at LIMIT $1 FOR UPDATE SKIP LOCKED)
                 RETURNING 1)
               SELECT count(*)::int AS n FROM gone`,
              [opts.batchSize, opts.selfInstanceId, opts.staleInstanceMs],
            )
          : await m.query<Row>(
              `WITH gone AS (
                 DELETE FROM service_instance WHERE id IN (
                   SELECT id FROM service_instance
                   WHERE stopped_at < now() - $2::int * interval '1 hour'
                   ORDER BY stopped_at LIMIT $1 FOR UPDATE SKIP LOCKED)
                 RETURNING 1)
               SELECT count(*)::int AS n FROM gone`,
              [opts.batchSize, opts.retentionHours],
            );
      return toNumber(n);
    });
  }

  /** Startup recovery outside the janitor lock (rescues, see planRescue): idempotent (SKIP LOCKED, status checked in SQL). */
  async failOrphaned(
    selfInstanceId: string,
    staleInstanceMs: number,
    batchSize: number,
  ): Promise<SweptTask[]> {
    return this.transactions.tx(
      (m) =>
        this.failBatch(m, 'instance_gone', {
          batchSize,
          selfInstanceId,
          staleInstanceMs,
        }),
      true,
    );
  }

  private async failBatch(
    m: SqlTx,
    step: Exclude<JanitorStep, 'delete'>,
    opts: { batchSize: number; selfInstanceId: string; staleInstanceMs: number },
  ): Promise<SweptTask[]> {
    let select: string;
    let params: unknown[];
    switch (step) {
      case 'expire':
        return this.writer.failRows(
          m,
          `SELECT id, status AS prev FROM task WHERE status IN ${LIVE_SQL} AND expires_at <= now()
           ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED`,
          [opts.batchSize],
          EXPIRED,
        );
      case 'lease_lapsed':
        select = `SELECT id FROM task WHERE status IN ${LIVE_SQL} AND instance_id IS NOT NULL
                  AND lease_expires_at < now() LIMIT $1 FOR UPDATE SKIP LOCKED`;
        params = [opts.batchSize];
        break;
      case 'instance_gone':
        // The instance that holds the task is stopped, silent for too long, or unknown: it will never finish it.
        select = `SELECT t.id FROM task t LEFT JOIN service_instance si ON si.id = t.instance_id
                  WHERE t.status IN ${LIVE_SQL} AND t.instance_id IS NOT NULL AND t.instance_id <> $2
                    AND (si.id IS NULL OR si.stopped_at IS NOT NULL
                         OR si.heartbeat_at < now() - $3::int * interval '1 millisecond')
                  LIMIT $1 FOR UPDATE OF t SKIP LOCKED`;
        params = [opts.batchSize, opts.selfInstanceId, opts.staleInstanceMs];
        break;
    }
    // The rows are locked by the inner select; the rescue is decided per row from what they hold.
    const lost = await m.query<Row>(
      `WITH due AS MATERIALIZED (${select})
       SELECT t.id, t.status, t.resumable, t.attempt, t.failed_attempts, t.max_attempts
         FROM task t JOIN due ON due.id = t.id`,
      params,
    );
    return this.writer.rescueRows(
      m,
      lost.map((r) =>
        planRescue({
          id: r.id as string,
          status: r.status as TaskStatus,
          resumable: r.resumable === true,
          attempt: toNumber(r.attempt),
          failedAttempts: toNumber(r.failed_attempts),
          maxAttempts: toNumber(r.max_attempts),
        }),
      ),
    );
  }
}
