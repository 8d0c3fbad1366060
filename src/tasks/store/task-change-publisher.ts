import { Injectable } from '@nestjs/common';
import { PgBusService } from '../../bus/pg-bus.service.js';
import type { SqlTx } from '../../database/sql-transaction.js';
import { TaskAuditWriter, type TaskAuditNote } from './task-audit-writer.js';
import type { TaskStatus } from '../task-state.js';
import type { TaskChange, TaskSnapshot } from '../task.types.js';
import { TASK_QUEUE_CHANNEL, type QueuedNotice } from '../task-queue.js';

/** The bus channel every task change goes out on (ids and status only; receivers re-read). */
export const TASK_CHANNEL = 'mcp_task_changed';

/**
 * Runs inside the transaction that changes a task, after the write: whatever it writes commits with the
 * change or not at all (an outbox, e.g. the legacy era's logged status notification).
 */
export type TaskChangeHook = (tx: SqlTx, task: TaskSnapshot, previous: TaskStatus | null) => Promise<void>;

/**
 * Announces every task change from inside the transaction that makes it: its audit rows (TaskAuditWriter),
 * the change hooks (outboxes such as the legacy era's logged status notification) and the bus notification, which PostgreSQL delivers at
 * commit and never on rollback. It also keeps the one lock order every task transaction follows (task rows,
 * the creation lock, counter rows, then the sessions' stream rows; docs/architecture.md): a transaction's
 * counter rows are taken before the first outbox row it writes. Every task repository publishes through it.
 */
@Injectable()
export class TaskChangePublisher {
  private readonly changeHooks: TaskChangeHook[] = [];
  /** Transactions whose deferred counter triggers are already queued to fire before their outbox rows. */
  private readonly countedNow = new WeakSet<SqlTx>();

  constructor(
    private readonly bus: PgBusService,
    private readonly audit: TaskAuditWriter,
  ) {}

  /**
   * Runs `hook` inside every transaction that creates or changes a task's status, after the write, so what it
   * writes commits with the change or not at all. For outboxes; keep it short (it holds the task's lock).
   */
  addChangeHook(hook: TaskChangeHook): void {
    this.changeHooks.push(hook);
  }

  /**
   * Publishes `task`'s change inside `m`, after its write, and records it in the audit trail (TaskAuditWriter:
   * queued to go with the COMMIT, no round trip of its own); `audit` says why when the change alone does not.
   * Callers that publish several changes in one transaction do so in session order (bySession, bySessionRow).
   */
  async publish(
    m: SqlTx,
    task: TaskSnapshot,
    previous: TaskStatus | null,
    audit?: TaskAuditNote,
  ): Promise<void> {
    if (!this.countedNow.has(m)) {
      // Counter rows before stream rows, in every transaction: a single write's deferred counter triggers
      // would otherwise fire at COMMIT, after its outbox rows, while a bulk or grouped write (counted by its
      // statement) takes them the other way round, and the two could wait for each other in a circle.
      // Creation has checked its limits by now (they are queued before this), so its own row is not counted
      // twice.
      m.atCommit('SET CONSTRAINTS ALL IMMEDIATE');
      this.countedNow.add(m);
    }
    const change: TaskChange = {
      taskId: task.id,
      ownerId: task.ownerId,
      sessionId: task.sessionId,
      era: task.era,
      status: task.status,
      previousStatus: previous,
      generation: task.generation,
    };
    this.audit.changed(m, task, previous, audit);
    for (const hook of this.changeHooks) await hook(m, task, previous);
    await this.bus.publish(TASK_CHANNEL, { ...change }, m);
  }

  /**
   * Announces, inside `m`, that a queued task (no instance) becomes claimable at its available_at: claimers
   * on every instance wake at commit (TASK_QUEUE_CHANNEL), never on rollback.
   */
  async announceQueued(m: SqlTx, task: TaskSnapshot): Promise<void> {
    if (task.instanceId !== null || task.status !== 'working' || !task.availableAt) return;
    const notice: QueuedNotice = { taskId: task.id, availableAtMs: task.availableAt.getTime(), count: 1 };
    await this.bus.publish(TASK_QUEUE_CHANNEL, { ...notice }, m);
  }

  /**
   * Announces, inside `m`, that `count` queued tasks become claimable at once, now or at `availableAtMs` (a
   * tool limit letting its waiting tasks go, a resumed tool, a limit holding tasks until a lease lapses):
   * one notice for all of them.
   */
  async announceReleased(
    m: SqlTx,
    firstTaskId: string,
    count: number,
    availableAtMs: number = Date.now(),
  ): Promise<void> {
    if (count <= 0) return;
    const notice: QueuedNotice = { taskId: firstTaskId, availableAtMs, count };
    await this.bus.publish(TASK_QUEUE_CHANNEL, { ...notice }, m);
  }
}
