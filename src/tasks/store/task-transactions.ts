import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { TasksConfig } from '../tasks.config.js';
import { runPrepared, type PreparedStatement } from '../../database/prepared-query.js';
import { CommitOutcomeUnknownError, inTransaction, type SqlTx } from '../../database/sql-transaction.js';
import type { Row } from './task-row.mapper.js';
import { TaskError, TaskErrorCode } from '../tasks.errors.js';
import { UnresolvedWriteError } from './unresolved-write.js';

/**
 * Attempts of a write whose COMMIT answer was lost (CommitOutcomeUnknownError) before its caller is told
 * so: each later attempt first recognises the work an earlier one landed (see insertAlone, finishAlone).
 */
const COMMIT_UNKNOWN_ATTEMPTS = 3;

/**
 * How often, and how far apart, a write whose COMMIT answer was lost asks whether its transaction
 * committed while PostgreSQL still reports it in progress (its backend has not yet noticed the dropped
 * connection, or is still finishing the commit).
 */
const XACT_STATUS_CHECKS = 5;
const XACT_STATUS_PAUSE_MS = 200;
const XACT_STATUS: PreparedStatement = {
  name: 'mcp_xact_status',
  text: `SELECT pg_xact_status($1::xid8) AS status`,
};

/**
 * The task transaction every task repository runs its work in (lock_timeout, the bulk flag, TASK_BUSY for a
 * lock wait that timed out), and how a write whose COMMIT answer was lost finds out what landed: by trying
 * again a write that recognises its own landed work (untilKnown), or by asking PostgreSQL whether its
 * transaction committed (knownTx, landed).
 */
@Injectable()
export class TaskTransactions {
  /** The transaction id of each transaction that has written a task row (see noteXact, knownTx). */
  private readonly xacts = new WeakMap<SqlTx, string>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly config: TasksConfig,
  ) {}

  /** Records the id of the transaction `m` (pg_current_xact_id, as its row write returned it). */
  noteXact(m: SqlTx, xact: string): void {
    this.xacts.set(m, xact);
  }

  /**
   * A task transaction. `bulk` marks statements that change many rows at once (janitor batches, rescues,
   * expiries found by lease renewal): the usage counters are then kept by statement triggers, which lock
   * the counter rows in key order (see migration TaskUsageCounters).
   */
  async tx<T>(work: (m: SqlTx) => Promise<T>, bulk = false): Promise<T> {
    try {
      return await inTransaction(
        this.dataSource,
        {
          lockTimeoutMs: this.config.TASK_LOCK_TIMEOUT_MS,
          localSettings: bulk ? { 'mcp.task_bulk': 'on' } : undefined,
        },
        work,
      );
    } catch (err) {
      if ((err as { code?: unknown }).code === '55P03') {
        throw new TaskError(TaskErrorCode.TASK_BUSY, 'Task is busy; try again');
      }
      throw err;
    }
  }

  /**
   * A task transaction (see tx) whose COMMIT answer, if lost, is found out rather than reported as a
   * failure: the transaction's own id, which its row write returns at no extra round trip, is looked up
   * with pg_xact_status. Committed: the answer the work computed is the truth, whatever anyone wrote
   * since. Aborted: nothing landed, so the write runs again. A transaction that wrote no row changed
   * nothing, and its reads are the answer. When the database cannot say (out of reach, or the transaction
   * still open there) it rejects with UnresolvedWriteError, which a retrying caller resolves with landed.
   */
  async knownTx<T>(work: (m: SqlTx) => Promise<T>): Promise<T> {
    for (let n = 1; ; n++) {
      const seen: { tx?: SqlTx; answer?: { value: T } } = {};
      try {
        return await this.tx(async (m) => {
          seen.tx = m;
          const value = await work(m);
          seen.answer = { value };
          return value;
        });
      } catch (err) {
        const { tx, answer } = seen;
        if (!(err instanceof CommitOutcomeUnknownError) || !tx || !answer) throw err;
        const xact = this.xacts.get(tx);
        if (xact === undefined) return answer.value;
        const unresolved = new UnresolvedWriteError(err.driverError, xact, answer.value);
        const landed = await this.landed(unresolved);
        if (landed) return landed.value;
        if (n >= COMMIT_UNKNOWN_ATTEMPTS) throw err;
      }
    }
  }

  /**
   * Whether the write behind `e` committed: its answer if so, undefined if it rolled back (nothing of it
   * landed; writing again is safe). Rejects with `e` while the database cannot tell.
   */
  async landed<T>(e: UnresolvedWriteError<T>): Promise<{ value: T } | undefined> {
    for (let n = 1; ; n++) {
      let status: unknown;
      try {
        [{ status }] = await runPrepared<Row>(this.dataSource, XACT_STATUS, [e.xact]);
      } catch {
        throw e;
      }
      if (status === 'committed') return { value: e.ifLanded };
      if (status === 'aborted') return undefined;
      // 'in progress' (its backend has not noticed the dropped connection yet): ask again, then give up.
      if (n >= XACT_STATUS_CHECKS) throw e;
      await new Promise((r) => setTimeout(r, XACT_STATUS_PAUSE_MS));
    }
  }

  /**
   * Runs `attempt` again while its COMMIT's answer is lost, up to COMMIT_UNKNOWN_ATTEMPTS times. Only for
   * writes whose attempts recognise what an earlier one landed, so a second attempt never writes twice.
   */
  async untilKnown<T>(attempt: () => Promise<T>): Promise<T> {
    for (let n = 1; ; n++) {
      try {
        return await attempt();
      } catch (err) {
        if (!(err instanceof CommitOutcomeUnknownError) || n >= COMMIT_UNKNOWN_ATTEMPTS) throw err;
      }
    }
  }
}
