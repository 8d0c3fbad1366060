import { Injectable } from '@nestjs/common';
import { isDeepStrictEqual } from 'node:util';
import { DataSource } from 'typeorm';
import { storableOutcomeJson } from '../../common/storable-text.js';
import { captureAuditContext, inAuditContext, type AuditContext } from '../../audit/audit-context.js';
import { DatabaseConfig } from '../../database/database.config.js';
import { TasksConfig } from '../tasks.config.js';
import type { PreparedStatement } from '../../database/prepared-query.js';
import { inTransaction } from '../../database/sql-transaction.js';
import { ON_ITS_OWN, type CommitGroupQueue } from '../../database/commit-group.js';
import { TaskCommitGroups } from './task-commit-groups.js';
import { TaskChangePublisher } from './task-change-publisher.js';
import {
  bySessionRow,
  expiryOf,
  LIVE_SQL,
  MS_UNTIL_EXPIRY,
  NOW_MS,
  rowToSnapshot,
  SNAPSHOT_COLUMNS,
  type Row,
} from './task-row.mapper.js';
import type { TaskStatus } from '../task-state.js';
import { TaskTransactions } from './task-transactions.js';
import { TaskWorkerRepository, type WorkerFence, type WorkerWriteResult } from './task-worker.repository.js';
import type { TaskErrorPayload, TaskSnapshot } from '../task.types.js';

/**
 * A worker's final write in one statement: the row is locked (FOR UPDATE) and written only if it is still
 * this run's (live, same generation, same instance) and not past created + ttl by the database clock. A
 * row locked by a concurrent change is re-checked against these conditions once that change commits
 * (READ COMMITTED re-evaluation), so a task cancelled or rescued meanwhile is not written. No row back
 * means "not applied": the caller then takes the row lock itself to learn why (and expire it if due).
 */
const FINISH_IF_CURRENT: PreparedStatement = {
  name: 'mcp_task_finish_if_current',
  text: `WITH cur AS (
           SELECT id, status AS prev FROM task
            WHERE id = $1 AND status IN ${LIVE_SQL} AND generation = $2 AND instance_id = $3
              AND expires_at > now()
            FOR UPDATE)
         UPDATE task t SET status = $4, status_message = $5,
                result = CASE WHEN $6::boolean THEN $7::jsonb ELSE t.result END,
                error = CASE WHEN $6::boolean THEN t.error ELSE $7::jsonb END,
                input_requests = '{}', instance_id = NULL, lease_expires_at = NULL,
                last_updated_at = ${NOW_MS}
           FROM cur WHERE t.id = cur.id
         RETURNING ${SNAPSHOT_COLUMNS.split(',')
           .map((c) => `t.${c.trim()}`)
           .join(', ')}, cur.prev AS previous_status, ${MS_UNTIL_EXPIRY}`,
};

/**
 * FINISH_IF_CURRENT for several runs at once (a commit group of worker outcomes), with the same conditions
 * per row. A row locked by another transaction is skipped (SKIP LOCKED): one busy task must not hold up the
 * unrelated outcomes of its group for up to lock_timeout, so it goes on its own path and waits there
 * alone. The rows are locked in id order; a row that is not written (skipped, or not the run's any more)
 * comes back as no row, and its outcome goes on its own path (which waits for the lock and says why).
 */
const FINISH_GROUP_ARITY = 7;
function finishGroupStatement(n: number): PreparedStatement {
  const tuples = Array.from({ length: n }, (_, i) => {
    const $ = (k: number): string => `$${i * FINISH_GROUP_ARITY + k}`;
    return `(${$(1)}::text, ${$(2)}::bigint, ${$(3)}::uuid, ${$(4)}::text, ${$(5)}::text, ${$(6)}::boolean, ${$(7)}::jsonb)`;
  }).join(', ');
  return {
    name: `mcp_task_finish_group_${n}`,
    text: `WITH v (id, generation, instance_id, status, status_message, ok, payload) AS (VALUES ${tuples}),
           cur AS (
             SELECT t.id, t.status AS prev FROM task t JOIN v ON v.id = t.id
              WHERE t.status IN ${LIVE_SQL} AND t.generation = v.generation AND t.instance_id = v.instance_id
                AND t.expires_at > now()
              ORDER BY t.id
              FOR UPDATE OF t SKIP LOCKED)
           UPDATE task t SET status = v.status, status_message = v.status_message,
                  result = CASE WHEN v.ok THEN v.payload ELSE t.result END,
                  error = CASE WHEN v.ok THEN t.error ELSE v.payload END,
                  input_requests = '{}', instance_id = NULL, lease_expires_at = NULL,
                  last_updated_at = ${NOW_MS}
             FROM cur JOIN v ON v.id = cur.id
            WHERE t.id = cur.id
           RETURNING ${SNAPSHOT_COLUMNS.split(',')
             .map((c) => `t.${c.trim()}`)
             .join(', ')}, cur.prev AS previous_status, ${MS_UNTIL_EXPIRY}`,
  };
}

type OutcomeFields = {
  result?: Record<string, unknown>;
  error?: TaskErrorPayload;
  statusMessage: string | null;
};

interface Outcome {
  fence: WorkerFence;
  to: 'completed' | 'failed';
  fields: OutcomeFields;
  /** The result (completed) or error (failed) as JSON, made once for whichever path writes it. */
  payload: string;
  /** The run's audit context: a group runs in one of its runs' context. */
  audit: AuditContext;
}

/** Whether `t` holds exactly the outcome `fields` of the run `fence`, written by that run (see finishOnce). */
function landedOutcome(
  t: TaskSnapshot,
  fence: WorkerFence,
  to: 'completed' | 'failed',
  fields: OutcomeFields,
): boolean {
  if (t.status !== to || t.generation !== fence.generation || t.instanceId !== null) return false;
  if (t.statusMessage !== fields.statusMessage) return false;
  // As stored: jsonb drops undefined members and orders keys its own way (deep equality ignores order).
  const stored = (v: unknown): unknown => (v === undefined ? null : JSON.parse(JSON.stringify(v)));
  return to === 'completed'
    ? isDeepStrictEqual(stored(fields.result), t.result)
    : isDeepStrictEqual(stored(fields.error), t.error);
}

/**
 * A run's final outcome (completed or failed), fenced like every worker write, and its commit group:
 * outcomes that arrive while an earlier group of them commits go together in one transaction (see
 * finishGroup). An outcome the group does not write, or whose COMMIT answer was lost, runs on its own path
 * (finishAlone), which recognises an outcome that landed.
 */
@Injectable()
export class TaskOutcomesRepository {
  /** Worker outcomes that arrive while another group of them commits go together (see finishGroup). */
  private readonly outcomes: CommitGroupQueue<Outcome, WorkerWriteResult>;

  constructor(
    private readonly dataSource: DataSource,
    private readonly config: TasksConfig,
    database: DatabaseConfig,
    private readonly transactions: TaskTransactions,
    private readonly publisher: TaskChangePublisher,
    private readonly worker: TaskWorkerRepository,
    groups: TaskCommitGroups,
  ) {
    this.outcomes = groups.queue('finish', {
      // Outcomes take no shared lock: several groups at once keep a finished run's wait short (a read of
      // the task waits for it), leaving half the pool to everything else.
      maxInFlight: Math.max(1, Math.floor(database.DB_POOL_MAX / 2)),
      runGroup: (entries) => this.finishGroup(entries),
      runOne: (o) => inAuditContext(o.audit, () => this.finishAlone(o.fence, o.to, o.fields, o.payload)),
    });
  }

  async completeIfCurrent(fence: WorkerFence, result: Record<string, unknown>): Promise<WorkerWriteResult> {
    return this.finishIfCurrent(fence, 'completed', { result, statusMessage: null });
  }

  async failIfCurrent(
    fence: WorkerFence,
    error: TaskErrorPayload,
    statusMessage: string | null = error.message,
  ): Promise<WorkerWriteResult> {
    return this.finishIfCurrent(fence, 'failed', { error, statusMessage });
  }

  /**
   * A run's outcome: the one-statement write (FINISH_IF_CURRENT) when the task is still the run's, which is
   * the common case; otherwise, in the same transaction, the general path that locks the row and says why
   * the write was refused (expiring the task if it is due). An outcome holding a NUL character is refused
   * with UnstorableValueError before it joins a group: PostgreSQL would refuse it on every attempt.
   */
  private async finishIfCurrent(
    fence: WorkerFence,
    to: 'completed' | 'failed',
    fields: OutcomeFields,
  ): Promise<WorkerWriteResult> {
    const value = to === 'completed' ? fields.result : fields.error;
    const payload = storableOutcomeJson(value, to === 'completed' ? 'result' : 'error', fields.statusMessage);
    return this.outcomes.submit({ fence, to, fields, payload, audit: captureAuditContext() });
  }

  private finishAlone(
    fence: WorkerFence,
    to: 'completed' | 'failed',
    fields: OutcomeFields,
    payload: string,
  ): Promise<WorkerWriteResult> {
    return this.transactions.untilKnown(() => this.finishOnce(fence, to, fields, payload));
  }

  /**
   * One attempt of finishAlone. A task that is no longer the run's yet holds exactly this outcome at the
   * run's generation was finished by this very write, by an earlier attempt or its commit group whose
   * COMMIT answer was lost (nothing else writes a terminal state without a new generation): it is
   * answered as applied.
   */
  private async finishOnce(
    fence: WorkerFence,
    to: 'completed' | 'failed',
    fields: OutcomeFields,
    payload: string,
  ): Promise<WorkerWriteResult> {
    const measuredAt = performance.now();
    return this.transactions.tx(async (m) => {
      const completed = to === 'completed';
      const [row] = await m.first<Row>(FINISH_IF_CURRENT, [
        fence.taskId,
        fence.generation,
        fence.instanceId,
        to,
        fields.statusMessage,
        completed,
        payload,
      ]);
      if (row) {
        const task = rowToSnapshot(row);
        const previous = row.previous_status as TaskStatus;
        await this.publisher.publish(m, task, previous);
        return { applied: true, task, previous, expiry: expiryOf(row, measuredAt) };
      }
      const refused = await this.worker.workerWriteIn(m, fence, to, fields);
      if (refused.applied || !refused.task || !landedOutcome(refused.task, fence, to, fields)) return refused;
      const [clock] = await m.query<Row>(`SELECT ${MS_UNTIL_EXPIRY} FROM task t WHERE t.id = $1`, [
        fence.taskId,
      ]);
      // Whether it was working or input_required before is no longer known; the run was working.
      return { applied: true, task: refused.task, previous: 'working', expiry: expiryOf(clock, measuredAt) };
    });
  }

  /**
   * Several runs' outcomes in one transaction: one FINISH statement for all of them (finishGroupStatement;
   * a bulk transaction, so the counters move in key order as one statement's change). The outcomes it did
   * not write (not current, due, gone, or a second outcome of a task already in the group) go on their own
   * path afterwards, where each learns why; those it wrote commit together.
   */
  private async finishGroup(entries: Outcome[]): Promise<Array<WorkerWriteResult | typeof ON_ITS_OWN>> {
    const answers: Array<WorkerWriteResult | typeof ON_ITS_OWN> = entries.map(() => ON_ITS_OWN);
    const firstOfTask = new Map<string, number>();
    entries.forEach((e, i) => {
      if (!firstOfTask.has(e.fence.taskId)) firstOfTask.set(e.fence.taskId, i);
    });
    const grouped = [...firstOfTask.values()].map((i) => entries[i]);
    const values = grouped.flatMap(({ fence, to, fields, payload }) => [
      fence.taskId,
      fence.generation,
      fence.instanceId,
      to,
      fields.statusMessage,
      to === 'completed',
      payload,
    ]);
    const measuredAt = performance.now();
    return inTransaction(
      this.dataSource,
      { lockTimeoutMs: this.config.TASK_LOCK_TIMEOUT_MS, localSettings: { 'mcp.task_bulk': 'on' } },
      async (m) => {
        const rows = await m.first<Row>(finishGroupStatement(grouped.length), values);
        for (const row of rows.sort(bySessionRow)) {
          const task = rowToSnapshot(row);
          const previous = row.previous_status as TaskStatus;
          const i = firstOfTask.get(task.id)!;
          await inAuditContext(entries[i].audit, () => this.publisher.publish(m, task, previous));
          answers[i] = {
            applied: true,
            task,
            previous,
            expiry: expiryOf(row, measuredAt),
          };
        }
        return answers;
      },
    );
  }
}
