import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { runPrepared, type PreparedStatement } from '../../database/prepared-query.js';
import { TaskChangePublisher } from './task-change-publisher.js';
import type { ListPosition } from '../task-ids.js';
import { TaskRowWriter } from './task-row-writer.js';
import { LIVE_SQL, rowToSnapshot, SNAPSHOT_COLUMNS, toNumber, type Row } from './task-row.mapper.js';
import { isLive } from '../task-state.js';
import { TaskTransactions } from './task-transactions.js';
import type { TaskSnapshot, VersionedTask } from '../task.types.js';
import { QUEUED_MESSAGE } from '../task-queue.js';
import type { SqlTx } from '../../database/sql-transaction.js';

/**
 * tasks/get and tasks/result read the owner's task on every call: prepared once per connection, mapped by
 * hand. Filtered by owner in SQL, so another owner's task is no row at all.
 */
const FIND_OWNED_CLOCKED: PreparedStatement = {
  name: 'mcp_task_find_owned_clocked',
  text: `SELECT ${SNAPSHOT_COLUMNS},
                (status IN ${LIVE_SQL} AND expires_at <= now()) AS due_now,
                (extract(epoch FROM (expires_at - now())) * 1000)::float8 AS ms_until_expiry
           FROM task WHERE id = $1 AND owner_id = $2`,
};

export interface CancelResult {
  applied: boolean;
  task: TaskSnapshot;
  /** The write found the task past created + ttl and expired it instead (it is now failed "Task expired"). */
  expired?: boolean;
}

/** A task read together with the database clock, so callers never compare app time with database time. */
export interface ClockedTask {
  task: TaskSnapshot;
  /** Live and past created + ttl by the database clock: the next locked write expires it. */
  due: boolean;
  /** Milliseconds from the database's now() to expires_at (negative once due). */
  msUntilExpiry: number;
}

export interface MergeResult {
  task: TaskSnapshot;
  /** The task was past created + ttl: the answers were refused and the task expired on the spot. */
  expired?: boolean;
  accepted: string[];
  ignored: string[];
  /** True when the last outstanding answer arrived: the task is working again, leased to the merger. */
  resumed: boolean;
}

/** A task with its change version (see Task.changeVersion). */
/**
 * The owner's reads and writes of tasks (TasksService): each filters by owner in SQL, so another owner's
 * task looks exactly like no task. Every change is one transaction: lock_timeout, SELECT … FOR UPDATE, the
 * liveness checks (a task found past its ttl is expired instead), the write, and the bus notification
 * issued inside the transaction so PostgreSQL delivers it at commit (and never on rollback). The other
 * task repositories: creation (task-creation.repository.ts), the workers' fenced writes
 * (task-worker.repository.ts, task-outcomes.repository.ts), operator reads (tasks-admin.repository.ts), the
 * janitor's sweeps (janitor/janitor.repository.ts).
 */
@Injectable()
export class TasksRepository {
  constructor(
    private readonly dataSource: DataSource,
    private readonly transactions: TaskTransactions,
    private readonly writer: TaskRowWriter,
    private readonly publisher: TaskChangePublisher,
  ) {}

  /** The owner's task and where it stands against the database clock (never the app clock). */
  async findOwnedClocked(ownerId: string, id: string): Promise<ClockedTask | null> {
    const [row] = await runPrepared<Row>(this.dataSource, FIND_OWNED_CLOCKED, [id, ownerId]);
    if (!row) return null;
    return {
      task: rowToSnapshot(row),
      due: row.due_now === true,
      msUntilExpiry: toNumber(row.ms_until_expiry),
    };
  }

  /** Newest first, keyset-paginated on (created_at, id): stable while other tasks are inserted. */
  async listOwned(ownerId: string, after: ListPosition | null, limit: number): Promise<TaskSnapshot[]> {
    const params: unknown[] = [ownerId, limit];
    let where = 'owner_id = $1';
    if (after) {
      params.push(after.createdAt, after.id);
      where += ' AND (created_at, id) < ($3, $4)';
    }
    const rows = await this.dataSource.query<Row[]>(
      `SELECT * FROM task WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT $2`,
      params,
    );
    return rows.map(rowToSnapshot);
  }

  /** Which of these ids the owner holds (subscriptions acknowledge only those). */
  async ownedIds(ownerId: string, ids: readonly string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await this.dataSource.query<Row[]>(
      'SELECT id FROM task WHERE owner_id = $1 AND id = ANY($2::text[])',
      [ownerId, [...ids]],
    );
    const owned = new Set(rows.map((r) => r.id as string));
    return ids.filter((id) => owned.has(id));
  }

  /** The owner's tasks among `ids`, each with its change version (for listeners that catch up). */
  async findOwnedVersioned(ownerId: string, ids: readonly string[]): Promise<VersionedTask[]> {
    if (ids.length === 0) return [];
    const rows = await this.dataSource.query<Row[]>(
      'SELECT * FROM task WHERE owner_id = $1 AND id = ANY($2::text[])',
      [ownerId, [...ids]],
    );
    return rows.map((r) => ({ task: rowToSnapshot(r), version: toNumber(r.change_version) }));
  }

  /**
   * Cancels a live task (working or input_required). A terminal task is returned unchanged with
   * applied=false; null means not found (or not this owner's).
   */
  async cancelIfLive(ownerId: string, id: string, message: string): Promise<CancelResult | null> {
    return this.transactions.knownTx(async (m) => {
      const locked = await this.writer.lock(m, id, ownerId);
      if (!locked) return null;
      const current = locked.task;
      const expired = await this.writer.expireLockedIfDue(m, locked);
      if (expired) return { applied: false, task: expired, expired: true };
      if (!isLive(current.status)) return { applied: false, task: current };
      const task = await this.writer.transition(m, current, 'cancelled', { statusMessage: message }, true);
      return { applied: true, task };
    });
  }

  /** Lazy expiry on read: a live task past created + ttl is failed "Task expired" right away. */
  async expireIfDue(ownerId: string, id: string): Promise<CancelResult | null> {
    return this.transactions.knownTx(async (m) => {
      const locked = await this.writer.lock(m, id, ownerId);
      if (!locked) return null;
      const current = locked.task;
      const task = await this.writer.expireLockedIfDue(m, locked);
      return task ? { applied: true, task, expired: true } : { applied: false, task: current };
    });
  }

  /**
   * tasks/update: merges answers into a parked task. Keys that are not outstanding (unknown, already
   * answered, from an earlier round) are ignored. While keys remain the task stays input_required; when the
   * last one arrives it goes back to working with a new generation, leased to `instanceId`, which is then
   * expected to resume the handler, or, with `instanceId` null (no free slot there), queued: claimable at
   * once by any instance, announced on TASK_QUEUE_CHANNEL. A task that is not parked ignores every answer.
   */
  async mergeInputResponses(
    ownerId: string,
    id: string,
    responses: Record<string, unknown>,
    resume: { instanceId: string | null; leaseMs: number; mustQueue?: (toolName: string) => boolean },
  ): Promise<MergeResult | null> {
    return this.transactions.knownTx(async (m) => {
      const locked = await this.writer.lock(m, id, ownerId);
      if (!locked) return null;
      const current = locked.task;
      const keys = Object.keys(responses);
      // Input after created + ttl must not revive the task, swept or not: it expires here instead.
      const expired = await this.writer.expireLockedIfDue(m, locked);
      if (expired) return { task: expired, accepted: [], ignored: keys, resumed: false, expired: true };
      const outstanding = current.inputRequests;
      if (current.status !== 'input_required' || Object.keys(outstanding).length === 0) {
        return { task: current, accepted: [], ignored: keys, resumed: false };
      }
      const accepted = keys.filter((k) => Object.hasOwn(outstanding, k));
      const ignored = keys.filter((k) => !Object.hasOwn(outstanding, k));
      if (accepted.length === 0) return { task: current, accepted, ignored, resumed: false };
      const inputResponses = { ...current.inputResponses };
      const remaining = { ...outstanding };
      for (const k of accepted) {
        inputResponses[k] = responses[k];
        delete remaining[k];
      }
      if (Object.keys(remaining).length > 0) {
        const task = await this.writer.write(
          m,
          current,
          { inputRequests: remaining, inputResponses },
          { kind: 'keep' },
        );
        return { task, accepted, ignored, resumed: false };
      }
      // A tool behind a gate (limits, a paused queue) resumes through the claim, which applies it.
      if (resume.instanceId === null || resume.mustQueue?.(current.toolName) === true) {
        const task = await this.resumeIntoQueue(m, current, inputResponses);
        return { task, accepted, ignored, resumed: true };
      }
      const task = await this.writer.transition(
        m,
        current,
        'working',
        { inputRequests: {}, inputResponses, statusMessage: null, instanceId: resume.instanceId },
        true,
        { kind: 'renew', ms: resume.leaseMs },
        { runStarts: true },
      );
      return { task, accepted, ignored, resumed: true };
    });
  }

  /** The resumed task goes back to working with no instance, claimable from now on (see task-queue.ts). */
  private async resumeIntoQueue(
    m: SqlTx,
    current: TaskSnapshot,
    inputResponses: Record<string, unknown>,
  ): Promise<TaskSnapshot> {
    const resumed = await this.writer.transition(
      m,
      current,
      'working',
      { inputRequests: {}, inputResponses, statusMessage: QUEUED_MESSAGE, instanceId: null },
      true,
      { kind: 'clear' },
    );
    const [row] = await m.query<Row>(
      `UPDATE task SET available_at = now() WHERE id = $1 RETURNING ${SNAPSHOT_COLUMNS}`,
      [resumed.id],
    );
    const task = rowToSnapshot(row);
    await this.publisher.announceQueued(m, task);
    return task;
  }
}
