import { Injectable } from '@nestjs/common';
import type { SqlTx } from '../../database/sql-transaction.js';
import { TaskChangePublisher } from './task-change-publisher.js';
import { EXPIRED } from '../task-failures.js';
import { checkInputRound, type InputLimits } from '../registry/input-round.js';
import { TaskRowWriter, type NextState, type SweptTask } from './task-row-writer.js';
import {
  LIVE_SQL,
  NOW_MS,
  rowToSnapshot,
  SNAPSHOT_COLUMNS,
  toNumber,
  type ExpiryReading,
  type Row,
} from './task-row.mapper.js';
import { canTransition, isLive, type TaskStatus } from '../task-state.js';
import { TaskTransactions } from './task-transactions.js';
import { inputKeyFor, type InputRequest, type TaskErrorPayload, type TaskSnapshot } from '../task.types.js';
import type { UnresolvedWriteError } from './unresolved-write.js';
import type { JsonValue } from '../../tool-dispatch/tool-context.js';

/** The identity a worker writes with: its task, the generation it was started on, and its instance. */
export interface WorkerFence {
  taskId: string;
  generation: number;
  instanceId: string;
}

/**
 * Why a fenced worker write did not apply. `expired`: the task was past created + ttl (by the database
 * clock) when the write came, so the write expired it instead (failed "Task expired").
 */
export type WorkerWriteRefusal = 'gone' | 'not_current' | 'expired';

export type { ExpiryReading } from './task-row.mapper.js';

export type WorkerWriteResult =
  | { applied: true; task: TaskSnapshot; previous: TaskStatus; expiry?: ExpiryReading }
  | { applied: false; reason: WorkerWriteRefusal; task: TaskSnapshot | null };

export type ParkResult =
  | { applied: true; task: TaskSnapshot; limitBroken: string | null }
  | { applied: false; reason: WorkerWriteRefusal; task: TaskSnapshot | null };

/** How a run gives its task back to the queue (TaskWorkerRepository.requeue). */
export interface RequeueOptions {
  /** How long before a worker may claim it, in ms (0: at once). */
  delayMs: number;
  /** The run failed (an error, a lost worker): it counts against the retry budget. A hand-over does not. */
  failed: boolean;
  /** The failed run's error, kept as last_error (named when the attempts run out). */
  lastError?: TaskErrorPayload | null;
  /** What tasks/get shows while it waits (the attempt and when the next one runs). */
  statusMessage: string;
}

/** What one lease renewal found for a run of this instance. */
export interface LeaseState {
  generation: number;
  /** False when the row was locked by another transaction: still held, renewed on the next round. */
  renewed: boolean;
}

/**
 * A running task's writes from its worker (TaskRunnerService), each fenced by the run's generation and
 * instance so a run that lost its task can never change it, and the lease renewals that keep a run's task.
 * The run's final outcome goes through TaskOutcomesRepository, whose refused outcomes come back here
 * (workerWriteIn) to learn why.
 */
@Injectable()
export class TaskWorkerRepository {
  constructor(
    private readonly transactions: TaskTransactions,
    private readonly writer: TaskRowWriter,
    private readonly publisher: TaskChangePublisher,
  ) {}

  /**
   * The run gives its task back to the queue, fenced like every worker write: no instance, no lease, the
   * generation bumped (this run is fenced out from now on), `attempt` + 1 (the next run's number), the
   * failure counted when `failed`, and claimable `delayMs` from now by the database clock. Published as a
   * change (statusMessage) and on TASK_QUEUE_CHANNEL, both at commit. Only a `working` task can be re-queued.
   */
  async requeue(fence: WorkerFence, opts: RequeueOptions): Promise<WorkerWriteResult> {
    return this.transactions.knownTx(async (m) => {
      const held = await this.lockForWorker(m, fence);
      if ('refused' in held) return held.refused;
      const current = held.current;
      if (current.status !== 'working') return { applied: false, reason: 'not_current', task: current };
      const [row] = await m.query<Row>(
        `UPDATE task SET instance_id = NULL, lease_expires_at = NULL, generation = generation + 1,
                attempt = attempt + 1, failed_attempts = failed_attempts + $2::int,
                last_error = COALESCE($3::jsonb, last_error),
                available_at = now() + $4::int * interval '1 millisecond', status_message = $5,
                last_updated_at = ${NOW_MS}
          WHERE id = $1
          RETURNING ${SNAPSHOT_COLUMNS}, pg_current_xact_id()::text AS xact`,
        [
          fence.taskId,
          opts.failed ? 1 : 0,
          opts.lastError ? JSON.stringify(opts.lastError) : null,
          Math.max(0, Math.floor(opts.delayMs)),
          opts.statusMessage,
        ],
      );
      this.transactions.noteXact(m, row.xact as string);
      const task = rowToSnapshot(row);
      await this.publisher.publish(
        m,
        task,
        current.status,
        opts.failed
          ? {
              kind: 'task.retry_scheduled',
              detail: {
                delayMs: Math.max(0, Math.floor(opts.delayMs)),
                availableAt: task.availableAt?.toISOString() ?? null,
                failedAttempts: task.failedAttempts,
                maxAttempts: task.maxAttempts,
                errorCode: opts.lastError?.code ?? null,
              },
            }
          : { kind: 'task.handed_over', detail: { handedOverAttempt: current.attempt } },
      );
      await this.publisher.announceQueued(m, task);
      return { applied: true, task, previous: current.status };
    });
  }

  /**
   * Counts a run that failed with a retryable error while its hand-over was being written (the hand-over
   * landed first): the queued attempt the hand-over made (generation `fence.generation + 1`, not yet claimed)
   * now records the failed attempt, its error and its backoff, as `requeue` with `failed` would have. Refused
   * once a newer run holds the task or it ended.
   */
  async chargeHandedOver(fence: WorkerFence, opts: RequeueOptions): Promise<WorkerWriteResult> {
    return this.transactions.knownTx(async (m) => {
      const locked = await this.writer.lock(m, fence.taskId, null);
      if (!locked) return { applied: false, reason: 'gone', task: null };
      const current = locked.task;
      if (current.status !== 'working' || current.generation !== fence.generation + 1 || current.instanceId) {
        return { applied: false, reason: 'not_current', task: current };
      }
      const delayMs = Math.max(0, Math.floor(opts.delayMs));
      const [row] = await m.query<Row>(
        `UPDATE task SET failed_attempts = failed_attempts + 1, last_error = COALESCE($2::jsonb, last_error),
                available_at = now() + $3::int * interval '1 millisecond', status_message = $4,
                last_updated_at = ${NOW_MS}
          WHERE id = $1
          RETURNING ${SNAPSHOT_COLUMNS}, pg_current_xact_id()::text AS xact`,
        [fence.taskId, opts.lastError ? JSON.stringify(opts.lastError) : null, delayMs, opts.statusMessage],
      );
      this.transactions.noteXact(m, row.xact as string);
      const task = rowToSnapshot(row);
      await this.publisher.publish(m, task, current.status, {
        kind: 'task.retry_scheduled',
        detail: {
          delayMs,
          availableAt: task.availableAt?.toISOString() ?? null,
          failedAttempts: task.failedAttempts,
          maxAttempts: task.maxAttempts,
          errorCode: opts.lastError?.code ?? null,
        },
      });
      return { applied: true, task, previous: current.status };
    });
  }

  /**
   * Stores the run's checkpoint, fenced like every worker write (the row locked, its generation and instance
   * checked), so a run that lost its task can never overwrite what a newer run saved. `json` is the state
   * already checked and serialised (QuotaService.checkpointJson). Not a visible change: nothing is published
   * and last_updated_at stays.
   */
  async saveCheckpoint(fence: WorkerFence, json: string): Promise<WorkerWriteResult> {
    return this.transactions.tx(async (m) => {
      const held = await this.lockForWorker(m, fence);
      if ('refused' in held) return held.refused;
      await m.query(`UPDATE task SET checkpoint = $2::jsonb WHERE id = $1`, [fence.taskId, json]);
      return { applied: true, task: held.current, previous: held.current.status };
    });
  }

  /** The checkpoint a task's last run saved (undefined when none), for a run that starts from it. */
  async readCheckpoint(taskId: string): Promise<JsonValue | undefined> {
    const [row] = await this.transactions.tx((m) =>
      m.query<Row>(`SELECT checkpoint FROM task WHERE id = $1`, [taskId]),
    );
    return (row?.checkpoint as JsonValue | null | undefined) ?? undefined;
  }

  /** Legacy input over SSE: the live worker flips the visible status without giving the task up. */
  async setWorkerStatus(
    fence: WorkerFence,
    status: 'working' | 'input_required',
    statusMessage: string | null,
  ): Promise<WorkerWriteResult> {
    return this.workerWrite(fence, status, { statusMessage });
  }

  /**
   * The handler asked for input and returned: store its questions under minted keys, its state, and park
   * the task as input_required with no worker and no lease. A round that breaks a limit (or is malformed)
   * fails the task instead, with an error naming the limit.
   */
  async parkForInput(
    fence: WorkerFence,
    requests: Record<string, InputRequest>,
    handlerState: unknown,
    limits: InputLimits,
  ): Promise<ParkResult> {
    return this.transactions.knownTx(async (m) => {
      const held = await this.lockForWorker(m, fence);
      if ('refused' in held) return held.refused;
      const current = held.current;
      const broken = checkInputRound(current, requests, handlerState, limits);
      if (broken) {
        const task = await this.writer.transition(
          m,
          current,
          'failed',
          { error: { code: -32603, message: broken }, statusMessage: broken },
          true,
        );
        return { applied: true, task, limitBroken: broken };
      }
      const round = current.inputRounds + 1;
      const minted: Record<string, InputRequest> = {};
      for (const [localKey, req] of Object.entries(requests)) {
        minted[inputKeyFor(round, localKey)] = { method: req.method, params: req.params ?? {} };
      }
      const task = await this.writer.transition(
        m,
        current,
        'input_required',
        {
          inputRequests: minted,
          handlerState: handlerState ?? null,
          inputRounds: round,
          instanceId: null,
          statusMessage: 'Waiting for input',
        },
        false,
        { kind: 'clear' },
      );
      return { applied: true, task, limitBroken: null };
    });
  }

  /**
   * Progress of a running task: the latest message becomes its statusMessage (status unchanged), and the
   * change is published so subscribers re-read it. Fenced like every worker write.
   */
  async setProgressMessage(fence: WorkerFence, statusMessage: string): Promise<WorkerWriteResult> {
    return this.transactions.knownTx(async (m) => {
      const held = await this.lockForWorker(m, fence);
      if ('refused' in held) return held.refused;
      const current = held.current;
      // While a legacy worker waits for an answer, its input_required message stays.
      if (current.status !== 'working' || current.statusMessage === statusMessage) {
        return { applied: true, task: current, previous: current.status };
      }
      const task = await this.writer.write(m, current, { statusMessage }, { kind: 'keep' });
      await this.publisher.publish(m, task, current.status);
      return { applied: true, task, previous: current.status };
    });
  }

  /**
   * One lease renewal round for the runs of this instance, judged by the database clock alone: the new
   * lease is now() + leaseMs, computed by PostgreSQL. Returns the generation each still-held task is at
   * (a run whose generation differs lost its task); an id missing from the answer is no longer this
   * instance's (cancelled, expired, rescued). Runs past created + ttl are expired here on the spot. A row
   * locked by another transaction is skipped (SKIP LOCKED) and reported held but not renewed, so one busy
   * row can neither stall the whole batch behind lock_timeout nor be mistaken for a lost lease.
   */
  async renewLeases(
    instanceId: string,
    ids: readonly string[],
    leaseMs: number,
  ): Promise<{ held: Map<string, LeaseState>; expired: SweptTask[] }> {
    if (ids.length === 0) return { held: new Map(), expired: [] };
    return this.transactions.tx(async (m) => {
      const expired = await this.writer.failRows(
        m,
        `SELECT id, status AS prev FROM task WHERE instance_id = $1 AND id = ANY($2::text[])
           AND status IN ${LIVE_SQL} AND expires_at <= now() FOR UPDATE SKIP LOCKED`,
        [instanceId, [...ids]],
        EXPIRED,
      );
      const rows = await m.query<Row>(
        `WITH mine AS (
           SELECT id, generation FROM task
           WHERE instance_id = $1 AND id = ANY($2::text[]) AND status IN ${LIVE_SQL} AND expires_at > now()),
         renewed AS (
           UPDATE task SET lease_expires_at = now() + $3::int * interval '1 millisecond'
           WHERE id IN (SELECT t.id FROM task t JOIN mine USING (id) FOR UPDATE OF t SKIP LOCKED)
           RETURNING id)
         SELECT mine.id, mine.generation, renewed.id IS NOT NULL AS renewed
         FROM mine LEFT JOIN renewed USING (id)`,
        [instanceId, [...ids], leaseMs],
      );
      const held = new Map<string, LeaseState>();
      for (const r of rows) {
        held.set(r.id as string, { generation: toNumber(r.generation), renewed: r.renewed === true });
      }
      return { held, expired };
    }, true);
  }

  /**
   * Whether a worker write that rejected with UnresolvedWriteError landed after all (TaskTransactions.landed):
   * the runner asks before it writes again.
   */
  landed<T>(e: UnresolvedWriteError<T>): Promise<{ value: T } | undefined> {
    return this.transactions.landed(e);
  }

  /**
   * A worker write's first step: the fence's row locked, if it is still that run's (live, same generation,
   * same instance) and not past created + ttl; otherwise why the write must not apply (a task found due is
   * expired here, as every write path does).
   */
  private async lockForWorker(
    m: SqlTx,
    fence: WorkerFence,
  ): Promise<
    | { current: TaskSnapshot }
    | { refused: { applied: false; reason: WorkerWriteRefusal; task: TaskSnapshot | null } }
  > {
    const locked = await this.writer.lock(m, fence.taskId, null);
    if (!locked) return { refused: { applied: false, reason: 'gone', task: null } };
    const current = locked.task;
    if (!this.isCurrent(current, fence)) {
      return { refused: { applied: false, reason: 'not_current', task: current } };
    }
    const expired = await this.writer.expireLockedIfDue(m, locked);
    if (expired) return { refused: { applied: false, reason: 'expired', task: expired } };
    return { current };
  }

  private isCurrent(t: TaskSnapshot, fence: WorkerFence): boolean {
    return isLive(t.status) && t.generation === fence.generation && t.instanceId === fence.instanceId;
  }

  private async workerWrite(
    fence: WorkerFence,
    to: TaskStatus,
    fields: Partial<NextState>,
  ): Promise<WorkerWriteResult> {
    return this.transactions.knownTx((m) => this.workerWriteIn(m, fence, to, fields));
  }

  /**
   * A fenced write inside `m`: the row locked and checked (lockForWorker), then written. Also the path
   * TaskOutcomesRepository takes to learn why an outcome its one-statement write did not apply was refused.
   */
  async workerWriteIn(
    m: SqlTx,
    fence: WorkerFence,
    to: TaskStatus,
    fields: Partial<NextState>,
  ): Promise<WorkerWriteResult> {
    const held = await this.lockForWorker(m, fence);
    if ('refused' in held) return held.refused;
    const current = held.current;
    if (current.status === to) {
      const task = await this.writer.write(m, current, fields, { kind: 'keep' });
      return { applied: true, task, previous: current.status };
    }
    if (!canTransition(current.status, to)) {
      return { applied: false, reason: 'not_current', task: current };
    }
    const clears: Partial<NextState> = isLive(to) ? {} : { instanceId: null, inputRequests: {} };
    const task = await this.writer.transition(
      m,
      current,
      to,
      { ...clears, ...fields },
      false,
      isLive(to) ? { kind: 'keep' } : { kind: 'clear' },
    );
    return { applied: true, task, previous: current.status };
  }
}
