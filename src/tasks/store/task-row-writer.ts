import { Injectable } from '@nestjs/common';
import type { PreparedStatement } from '../../database/prepared-query.js';
import type { SqlTx } from '../../database/sql-transaction.js';
import type { StoredTraceContext } from '../../telemetry/trace-context.js';
import type { TaskAuditNote } from './task-audit-writer.js';
import { TaskChangePublisher } from './task-change-publisher.js';
import { EXPIRED } from '../task-failures.js';
import {
  bySessionRow,
  NOW_MS,
  returned,
  rowToSnapshot,
  SNAPSHOT_COLUMNS,
  type Row,
} from './task-row.mapper.js';
import { canTransition, isLive, type TaskStatus } from '../task-state.js';
import { TaskTransactions } from './task-transactions.js';
import type { InputRequest, TaskErrorPayload, TaskSnapshot } from '../task.types.js';

/**
 * The row lock every write takes first, with the expiry check folded in: now() is the transaction's start
 * time, so `expires_at <= now()` here is the very answer a later statement of the same transaction would give.
 */
const LOCK_BY_ID: PreparedStatement = {
  name: 'mcp_task_lock_by_id',
  text: `SELECT ${SNAPSHOT_COLUMNS}, (expires_at <= now()) AS due_now
           FROM task WHERE id = $1 FOR UPDATE`,
};
const LOCK_OWNED: PreparedStatement = {
  name: 'mcp_task_lock_owned',
  text: `SELECT ${SNAPSHOT_COLUMNS}, (expires_at <= now()) AS due_now
           FROM task WHERE id = $1 AND owner_id = $2 FOR UPDATE`,
};

/** A task failed or deleted in bulk (janitor batches, lease renewal), as metrics and traces need it. */
export interface SweptTask {
  id: string;
  toolName: string;
  status: TaskStatus;
  createdAt: Date;
  traceContext: StoredTraceContext | null;
}

/**
 * What the janitor does with one task whose worker was lost (TaskRowWriter.rescueRows): re-queue it as its
 * next attempt, or fail it with `error`. `lastError` is kept as last_error (a resumable task's lost run);
 * `countFailure` adds the lost run to failed_attempts (the retry budget's measure).
 */
export type RescuePlan =
  | { id: string; requeue: true; statusMessage: string; lastError: TaskErrorPayload }
  | {
      id: string;
      requeue: false;
      statusMessage: string;
      error: TaskErrorPayload;
      lastError: TaskErrorPayload | null;
      countFailure: boolean;
    };

/** The mutable part of a row that one write replaces as a whole. */
export interface NextState {
  status: TaskStatus;
  statusMessage: string | null;
  result: Record<string, unknown> | null;
  error: TaskErrorPayload | null;
  inputRequests: Record<string, InputRequest>;
  inputResponses: Record<string, unknown>;
  handlerState: unknown;
  inputRounds: number;
  generation: number;
  instanceId: string | null;
}

/** A row read under its lock; `pastTtl`: expires_at <= now() by the database clock (live or not). */
export interface LockedTask {
  task: TaskSnapshot;
  pastTtl: boolean;
}

export type LeaseChange = { kind: 'keep' } | { kind: 'clear' } | { kind: 'renew'; ms: number };

/** The whole-state write of a locked row; one prepared statement per way the lease changes. */
function writeStatement(kind: LeaseChange['kind'], leaseSql: string): PreparedStatement {
  return {
    name: `mcp_task_write_lease_${kind}`,
    text: `UPDATE task SET status = $2, status_message = $3, result = $4::jsonb, error = $5::jsonb,
                  input_requests = $6::jsonb, input_responses = $7::jsonb, handler_state = $8::jsonb,
                  input_rounds = $9, generation = $10, instance_id = $11, lease_expires_at = ${leaseSql},
                  last_updated_at = ${NOW_MS}
            WHERE id = $1 RETURNING ${SNAPSHOT_COLUMNS}, pg_current_xact_id()::text AS xact`,
  };
}
const WRITE: Record<LeaseChange['kind'], PreparedStatement> = {
  keep: writeStatement('keep', 'lease_expires_at'),
  clear: writeStatement('clear', 'NULL'),
  renew: writeStatement('renew', `now() + $12::int * interval '1 millisecond'`),
};

/**
 * The locked row writes the task repositories share, inside a transaction they opened (TaskTransactions):
 * the row lock with the expiry check, lazy expiry, the checked status change, the whole-state write, and
 * the bulk failure of claimed rows. Each write is published (TaskChangePublisher) in the same transaction.
 */
@Injectable()
export class TaskRowWriter {
  constructor(
    private readonly transactions: TaskTransactions,
    private readonly publisher: TaskChangePublisher,
  ) {}

  /** Locks the task's row (FOR UPDATE) and reads it, with whether it is past created + ttl (database clock). */
  async lock(m: SqlTx, id: string, ownerId: string | null): Promise<LockedTask | null> {
    const [row] =
      ownerId === null ? await m.first<Row>(LOCK_BY_ID, [id]) : await m.first<Row>(LOCK_OWNED, [id, ownerId]);
    return row ? { task: rowToSnapshot(row), pastTtl: row.due_now === true } : null;
  }

  /**
   * Inside a write's transaction, with the row locked: a live task past created + ttl by the database clock
   * is failed "Task expired" (as the janitor would) and returned; null when it is not due. Every write path
   * calls this first, so no write can act on (or revive) a task whose ttl has run out but was not swept yet.
   */
  async expireLockedIfDue(m: SqlTx, locked: LockedTask): Promise<TaskSnapshot | null> {
    const current = locked.task;
    if (!isLive(current.status) || !locked.pastTtl) return null;
    return this.transition(
      m,
      current,
      'failed',
      { statusMessage: 'Task expired', error: EXPIRED },
      true,
      { kind: 'clear' },
      { kind: 'task.expired' },
    );
  }

  /**
   * A checked status change: refuses anything the state machine forbids, then writes and publishes (with
   * `audit`, what the audit trail should know beyond the change itself).
   */
  async transition(
    m: SqlTx,
    current: TaskSnapshot,
    to: TaskStatus,
    fields: Partial<NextState>,
    bumpGeneration: boolean,
    lease: LeaseChange = isLive(to) ? { kind: 'keep' } : { kind: 'clear' },
    audit?: TaskAuditNote,
  ): Promise<TaskSnapshot> {
    if (!canTransition(current.status, to)) {
      throw new Error(`illegal task transition ${current.status} -> ${to} (${current.id})`);
    }
    const terminalClears: Partial<NextState> = isLive(to) ? {} : { instanceId: null, inputRequests: {} };
    const task = await this.write(
      m,
      current,
      {
        ...terminalClears,
        ...fields,
        status: to,
        generation: bumpGeneration ? current.generation + 1 : current.generation,
      },
      lease,
    );
    await this.publisher.publish(m, task, current.status, audit);
    return task;
  }

  async write(
    m: SqlTx,
    current: TaskSnapshot,
    fields: Partial<NextState>,
    lease: LeaseChange,
  ): Promise<TaskSnapshot> {
    const next: NextState = {
      status: current.status,
      statusMessage: current.statusMessage,
      result: current.result,
      error: current.error,
      inputRequests: { ...current.inputRequests },
      inputResponses: { ...current.inputResponses },
      handlerState: current.handlerState,
      inputRounds: current.inputRounds,
      generation: current.generation,
      instanceId: current.instanceId,
      ...fields,
    };
    const values: unknown[] = [
      current.id,
      next.status,
      next.statusMessage,
      next.result === null ? null : JSON.stringify(next.result),
      next.error === null ? null : JSON.stringify(next.error),
      JSON.stringify(next.inputRequests),
      JSON.stringify(next.inputResponses),
      next.handlerState === null || next.handlerState === undefined
        ? null
        : JSON.stringify(next.handlerState),
      next.inputRounds,
      next.generation,
      next.instanceId,
    ];
    if (lease.kind === 'renew') values.push(Math.floor(lease.ms));
    const rows = await m.prepared<Row>(WRITE[lease.kind], values);
    this.transactions.noteXact(m, rows[0].xact as string);
    return rowToSnapshot(rows[0]);
  }

  /** Fails the live rows `select` claims (id, prev), bumping their generation, and publishes each change. */
  async failRows(m: SqlTx, select: string, params: unknown[], error: TaskErrorPayload): Promise<SweptTask[]> {
    const rows = returned(
      await m.query(
        `WITH due AS MATERIALIZED (${select})
       UPDATE task t SET status = 'failed', status_message = $${params.length + 1},
              error = $${params.length + 2}::jsonb, result = NULL, input_requests = '{}',
              generation = t.generation + 1, instance_id = NULL, lease_expires_at = NULL,
              last_updated_at = ${NOW_MS}
       FROM due WHERE t.id = due.id
       RETURNING t.*, due.prev AS previous_status`,
        [...params, error.message, JSON.stringify(error)],
      ),
    );
    // Every caller fails rows for their ttl (the janitor's expire step, a lease renewal): the audit trail says so.
    return this.publishSwept(m, rows, () => (error === EXPIRED ? { kind: 'task.expired' } : undefined));
  }

  /**
   * Carries out the janitor's plans for rows this transaction already holds locked (the step's FOR UPDATE
   * SKIP LOCKED select): one UPDATE for all of them. A re-queued row keeps status `working` with no instance
   * or lease, claimable now, as its next attempt (generation + 1 fences the lost run out, as on a failed
   * row); a failed one is written as failRows writes it. Every change is published, in one session order for
   * the whole batch, and each re-queued row is announced on the queue channel, all at commit.
   */
  async rescueRows(m: SqlTx, plans: readonly RescuePlan[]): Promise<SweptTask[]> {
    if (plans.length === 0) return [];
    const rows = returned(
      await m.query(
        `WITH plan AS (
           SELECT * FROM unnest($1::text[], $2::boolean[], $3::text[], $4::jsonb[], $5::jsonb[], $6::int[])
             AS p(id, requeue, message, error, last_error, failed)),
         prev AS (SELECT t.id, t.status FROM task t JOIN plan ON plan.id = t.id)
         UPDATE task t SET
                status = CASE WHEN plan.requeue THEN 'working' ELSE 'failed' END,
                status_message = plan.message, error = plan.error,
                result = NULL, input_requests = '{}',
                generation = t.generation + 1, instance_id = NULL, lease_expires_at = NULL,
                attempt = t.attempt + CASE WHEN plan.requeue THEN 1 ELSE 0 END,
                failed_attempts = t.failed_attempts + plan.failed,
                last_error = COALESCE(plan.last_error, t.last_error),
                available_at = CASE WHEN plan.requeue THEN now() ELSE NULL END,
                last_updated_at = ${NOW_MS}
           FROM plan JOIN prev ON prev.id = plan.id
          WHERE t.id = plan.id
          RETURNING t.*, prev.status AS previous_status`,
        [
          plans.map((p) => p.id),
          plans.map((p) => p.requeue),
          plans.map((p) => p.statusMessage),
          plans.map((p) => (p.requeue ? null : JSON.stringify(p.error))),
          plans.map((p) => (p.lastError ? JSON.stringify(p.lastError) : null)),
          plans.map((p) => (p.requeue || p.countFailure ? 1 : 0)),
        ],
      ),
    );
    return this.publishSwept(m, rows, (task) => ({
      kind: 'task.rescued',
      detail: {
        outcome: task.status === 'working' ? 'requeued' : 'failed',
        lostAttempt: task.status === 'working' ? task.attempt - 1 : task.attempt,
      },
    }));
  }

  /**
   * Publishes rows a bulk write changed (RETURNING t.*, previous_status), in one session order, and announces
   * the ones it left queued; returns them as swept tasks.
   */
  private async publishSwept(
    m: SqlTx,
    rows: Row[],
    audit: (task: TaskSnapshot) => TaskAuditNote | undefined,
  ): Promise<SweptTask[]> {
    const swept: SweptTask[] = [];
    rows.sort(bySessionRow);
    for (const r of rows) {
      const task = rowToSnapshot(r);
      await this.publisher.publish(m, task, r.previous_status as TaskStatus, audit(task));
      await this.publisher.announceQueued(m, task);
      swept.push({
        id: task.id,
        toolName: task.toolName,
        status: task.status,
        createdAt: task.createdAt,
        traceContext: task.traceContext,
      });
    }
    return swept;
  }
}
