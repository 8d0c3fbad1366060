import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { TasksConfig } from './tasks.config.js';
import { AdvisoryLockKey } from '../database/advisory-locks.js';
import { runPrepared, type PreparedStatement } from '../database/prepared-query.js';
import { inTransaction } from '../database/sql-transaction.js';
import type { StoredTraceContext } from '../telemetry/trace-context.js';
import { CommitGroupQueue, type CommitGroupListener } from './commit-group.js';
import { LIMIT_SQLSTATES, limitRefusal, oneMore, strictest, type CreationLimits } from './creation-limits.js';
import { TaskChangePublisher } from './task-change-publisher.js';
import { bySession, NOW_MS, rowToSnapshot, SNAPSHOT_COLUMNS, type Row } from './task-sql.js';
import { TaskTransactions } from './task-transactions.js';
import type { TaskEra, TaskSnapshot } from './task.types.js';

export interface NewTask {
  id: string;
  ownerId: string;
  sessionId: string | null;
  era: TaskEra;
  toolName: string;
  ttlMs: number;
  pollIntervalMs: number;
  requestParams: Record<string, unknown>;
  /**
   * The instance that will run it (its lease starts now), or null to queue it: no instance, no lease, claimable
   * at once (available_at = now()), announced on TASK_QUEUE_CHANNEL at commit.
   */
  instanceId: string | null;
  leaseMs: number;
  statusMessage?: string | null;
  traceContext?: StoredTraceContext | null;
  /** The owner's principal as the creating request saw it (for runs claimed on another instance). */
  principal?: Record<string, unknown> | null;
  /** From the tool's durability declaration (defaults: not resumable, one attempt). */
  resumable?: boolean;
  maxAttempts?: number;
  /** An Idempotency-Key and the hash of the tool and arguments it came with. */
  idempotencyKey?: string | null;
  requestHash?: string | null;
  /** The task this one redrives (`tasks retry`). */
  redrivenFrom?: string | null;
}

const INSERT_COLUMNS = `id, owner_id, session_id, era, tool_name, status, status_message, created_at,
  last_updated_at, ttl_ms, expires_at, poll_interval_ms, request_params, instance_id, lease_expires_at,
  trace_context, principal, resumable, max_attempts, idempotency_key, request_hash, redriven_from, available_at`;
/** Values one new row takes (see insertValues), and the row they make, from placeholder $offset+1 on. */
const INSERT_ARITY = 18;
function insertTuple(offset: number): string {
  const $ = (n: number): string => `$${n + offset}`;
  // A row without an instance is queued: no lease, claimable from now on.
  return `(${$(1)}, ${$(2)}, ${$(3)}, ${$(4)}, ${$(5)}, 'working', ${$(6)}, ${NOW_MS}, ${NOW_MS}, ${$(7)}::int,
           ${NOW_MS} + ${$(7)}::int * interval '1 millisecond', ${$(8)}, ${$(9)}::jsonb, ${$(10)}::uuid,
           CASE WHEN ${$(10)}::uuid IS NULL THEN NULL ELSE now() + ${$(11)}::int * interval '1 millisecond' END,
           ${$(12)}::jsonb, ${$(13)}::jsonb, ${$(14)}::boolean, ${$(15)}::int, ${$(16)}, ${$(17)}, ${$(18)},
           CASE WHEN ${$(10)}::uuid IS NULL THEN now() ELSE NULL END)`;
}
function insertValues(t: NewTask): unknown[] {
  return [
    t.id,
    t.ownerId,
    t.sessionId,
    t.era,
    t.toolName,
    t.statusMessage ?? null,
    t.ttlMs,
    t.pollIntervalMs,
    JSON.stringify(t.requestParams),
    t.instanceId,
    t.leaseMs,
    t.traceContext ? JSON.stringify(t.traceContext) : null,
    t.principal ? JSON.stringify(t.principal) : null,
    t.resumable ?? false,
    t.maxAttempts ?? 1,
    t.idempotencyKey ?? null,
    t.requestHash ?? null,
    t.redrivenFrom ?? null,
  ];
}
/** INSERT of `n` rows (a commit group's creations are one statement). */
function insertStatement(n: number): PreparedStatement {
  const tuples = Array.from({ length: n }, (_, i) => insertTuple(i * INSERT_ARITY)).join(', ');
  return {
    name: n === 1 ? 'mcp_task_insert' : `mcp_task_insert_${n}`,
    text: `INSERT INTO task (${INSERT_COLUMNS}) VALUES ${tuples} RETURNING ${SNAPSHOT_COLUMNS}`,
  };
}
const INSERT_TASK = insertStatement(1);

/** The row a creation with a freshly minted id finds already there: the one an earlier attempt committed. */
const FIND_CREATED: PreparedStatement = {
  name: 'mcp_task_find_created',
  text: `SELECT ${SNAPSHOT_COLUMNS} FROM task WHERE id = $1 AND owner_id = $2 AND tool_name = $3`,
};

interface Creation {
  task: NewTask;
  limits: CreationLimits;
}

/**
 * Task creation under the creation limits, and its commit group: creations that arrive while another group
 * of them commits go together in one transaction (see insertGroup). The limits are checked against the
 * usage counters under the creation advisory lock, in the round trip that commits (migration
 * TaskUsageCounters).
 */
@Injectable()
export class TaskCreationRepository {
  /** Creations that arrive while another group of them commits go together (see insertGroup). */
  private readonly creations: CommitGroupQueue<Creation, TaskSnapshot>;
  private readonly groupListeners: CommitGroupListener[] = [];

  constructor(
    private readonly dataSource: DataSource,
    private readonly config: TasksConfig,
    private readonly transactions: TaskTransactions,
    private readonly publisher: TaskChangePublisher,
  ) {
    const maxGroup = config.TASK_COMMIT_GROUP_MAX;
    // Creation groups queue behind the creation lock anyway: one in flight, the next one filling up.
    this.creations = new CommitGroupQueue({
      maxGroup,
      maxInFlight: 1,
      runGroup: (entries) => this.insertGroup(entries),
      runOne: (c) => this.insertAlone(c.task, c.limits),
      onGroup: (size, fellBack) => this.groupListeners.forEach((l) => l('create', size, fellBack)),
    });
  }

  /** Told of every creation group once it has run (the metrics). */
  onCommitGroup(listener: CommitGroupListener): void {
    this.groupListeners.push(listener);
  }

  /**
   * Inserts a task unless a creation limit is reached: N parallel creates against a limit of L leave
   * exactly min(N, L) live tasks, and each refused one gets its limit's error. Creations arriving together
   * are committed as a group (insertGroup); a group that cannot take them all runs each one alone.
   */
  insertWithLimits(t: NewTask, limits: CreationLimits): Promise<TaskSnapshot> {
    return this.creations.submit({ task: t, limits });
  }

  /**
   * One creation in its own transaction. The row goes in first; the round trip that commits then takes the
   * creation advisory lock and checks the limits against the usage counters (which count a creation at its
   * commit), so the lock is held for that one round trip only. Creations checked before this one have
   * committed, so the counts cannot miss one. A refusal rolls the insert back. See migration
   * TaskUsageCounters.
   */
  private insertAlone(t: NewTask, limits: CreationLimits): Promise<TaskSnapshot> {
    return this.transactions.untilKnown(() => this.insertOnce(t, limits));
  }

  /**
   * One attempt of insertAlone. The id is minted for this creation, so a duplicate of it can only be the
   * row an earlier attempt (or the commit group it was in) committed without hearing back: that row is the
   * answer, not an error.
   */
  private async insertOnce(t: NewTask, limits: CreationLimits): Promise<TaskSnapshot> {
    try {
      return await this.transactions.tx(async (m) => {
        const rows = await m.first<Row>(INSERT_TASK, insertValues(t));
        const task = rowToSnapshot(rows[0]);
        m.atCommit(`SELECT pg_advisory_xact_lock(${AdvisoryLockKey.TaskCreation})`);
        m.atCommit('SELECT task_check_creation_limits($1, $2::int, $3::int, $4::int)', [
          t.ownerId,
          limits.maxPerOwner,
          limits.maxRetainedPerOwner,
          limits.maxTotal,
        ]);
        await this.publisher.publish(m, task, null);
        await this.publisher.announceQueued(m, task);
        return task;
      });
    } catch (err) {
      const e = err as { code?: unknown; constraint?: unknown };
      const limit = LIMIT_SQLSTATES[String(e.code)];
      if (limit) throw limitRefusal(limit, limits);
      if (e.code === '23505' && e.constraint === 'PK_task') {
        const [row] = await runPrepared<Row>(this.dataSource, FIND_CREATED, [t.id, t.ownerId, t.toolName]);
        if (row) return rowToSnapshot(row);
      }
      throw err;
    }
  }

  /**
   * Several creations in one transaction, the creation lock held from its first round trip to its commit:
   * one multi-row INSERT (a bulk transaction, so a statement trigger counts the rows at once, in the
   * counters' key order: migration TaskUsageBulkInsert), then the limits checked once per owner against
   * counters that already include the group. A group passes only if every owner's count, and the total,
   * still fit with all of its rows in, so each creation in it fits too; otherwise the whole group rolls back
   * and each creation runs alone (insertAlone), which gives each its exact answer.
   */
  private async insertGroup(entries: Creation[]): Promise<TaskSnapshot[]> {
    return inTransaction(
      this.dataSource,
      {
        lockTimeoutMs: this.config.TASK_LOCK_TIMEOUT_MS,
        advisoryLock: AdvisoryLockKey.TaskCreation,
        localSettings: { 'mcp.task_bulk': 'on' },
      },
      async (m) => {
        const rows = await m.first<Row>(
          insertStatement(entries.length),
          entries.flatMap((e) => insertValues(e.task)),
        );
        const byId = new Map(rows.map((r) => [r.id as string, rowToSnapshot(r)]));
        // The strictest limits any entry of an owner carries (they come from one configuration).
        const owners = new Map<string, CreationLimits>();
        for (const { task, limits } of entries) {
          const seen = owners.get(task.ownerId);
          owners.set(task.ownerId, seen ? strictest(seen, limits) : limits);
        }
        const total = Math.min(...entries.map((e) => e.limits.maxTotal));
        // The counters hold this group's rows already: "refused when count >= limit" must become > limit.
        for (const [owner, l] of owners) {
          m.atCommit('SELECT task_check_creation_limits($1, $2::int, $3::int, $4::int)', [
            owner,
            oneMore(l.maxPerOwner),
            l.maxRetainedPerOwner,
            oneMore(total),
          ]);
        }
        const created = entries.map(({ task: t }) => {
          const task = byId.get(t.id);
          if (!task) throw new Error(`commit group: no row came back for task ${t.id}`);
          return task;
        });
        for (const task of [...created].sort(bySession)) {
          await this.publisher.publish(m, task, null);
          await this.publisher.announceQueued(m, task);
        }
        return created;
      },
    );
  }
}
