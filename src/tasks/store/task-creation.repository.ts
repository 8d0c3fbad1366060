import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { TasksConfig } from '../tasks.config.js';
import { captureAuditContext, inAuditContext, type AuditContext } from '../../audit/audit-context.js';
import { AdvisoryLockKey } from '../../database/advisory-locks.js';
import { runPrepared, type PreparedStatement } from '../../database/prepared-query.js';
import { inTransaction, type SqlTx } from '../../database/sql-transaction.js';
import type { StoredTraceContext } from '../../telemetry/trace-context.js';
import type { CommitGroupQueue } from '../../database/commit-group.js';
import { TaskCommitGroups } from './task-commit-groups.js';
import { storableOutcomeJson } from '../../common/storable-text.js';
import { LIMIT_SQLSTATES, limitRefusal, oneMore, strictest, type CreationLimits } from './creation-limits.js';
import { TaskChangePublisher } from './task-change-publisher.js';
import {
  bySession,
  expiryOf,
  MS_UNTIL_EXPIRY,
  NOW_MS,
  rowToSnapshot,
  SNAPSHOT_COLUMNS,
  type ExpiryReading,
  type Row,
} from './task-row.mapper.js';
import { TaskTransactions } from './task-transactions.js';
import type { TaskEra, TaskErrorPayload, TaskSnapshot } from '../task.types.js';

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
  /** The checkpoint (stored JSON) its first run saved before the row existed (an inline call queued). */
  checkpoint?: string | null;
  /** Its first attempt's number: 2 when an inline run of the call already was attempt 1. */
  attempt?: number;
  /** Whose share of the workers it runs on (the owner when not given). */
  fairnessKey?: string;
  /** Set for tools that declare limits: the per-key value of its arguments ('' without a per-key limit). */
  limitKey?: string | null;
  /** Queued behind its paused tool: no available_at until the tool is resumed. */
  paused?: boolean;
}

/**
 * The final state of a task whose work ended before it was recorded (a required tool that finished inside
 * the inline window): written by its creation (insertFinished), so one write stands for a create and the
 * run's outcome.
 */
export type FinishedOutcome =
  { status: 'completed'; result: Record<string, unknown> } | { status: 'failed'; error: TaskErrorPayload };

/** A finished creation's final state as it is written: its status, statusMessage and stored JSON. */
interface FinishedWrite {
  status: FinishedOutcome['status'];
  statusMessage: string | null;
  payload: string;
}

const INSERT_COLUMNS = `id, owner_id, session_id, era, tool_name, status, status_message, created_at,
  last_updated_at, ttl_ms, expires_at, poll_interval_ms, request_params, instance_id, lease_expires_at,
  trace_context, principal, resumable, max_attempts, idempotency_key, request_hash, redriven_from, available_at,
  result, error, checkpoint, attempt, fairness_key, limit_key, queue_hold`;
/** Values one new row takes (see insertValues), and the row they make, from placeholder $offset+1 on. */
const INSERT_ARITY = 26;
function insertTuple(offset: number): string {
  const $ = (n: number): string => `$${n + offset}`;
  // A live row without an instance is queued: no lease, claimable from now on. A finished row ($19 is its
  // status) has neither instance nor lease and is never claimable, as a run's outcome leaves it. A queued row
  // held by its paused tool ($26) has no available_at until the tool is resumed.
  return `(${$(1)}, ${$(2)}, ${$(3)}, ${$(4)}, ${$(5)}, ${$(19)}, ${$(6)}, ${NOW_MS}, ${NOW_MS}, ${$(7)}::int,
           ${NOW_MS} + ${$(7)}::int * interval '1 millisecond', ${$(8)}, ${$(9)}::jsonb, ${$(10)}::uuid,
           CASE WHEN ${$(10)}::uuid IS NULL THEN NULL ELSE now() + ${$(11)}::int * interval '1 millisecond' END,
           ${$(12)}::jsonb, ${$(13)}::jsonb, ${$(14)}::boolean, ${$(15)}::int, ${$(16)}, ${$(17)}, ${$(18)},
           CASE WHEN ${$(10)}::uuid IS NULL AND ${$(19)} = 'working' AND ${$(26)}::text IS NULL THEN now() END,
           ${$(20)}::jsonb, ${$(21)}::jsonb, ${$(22)}::jsonb, ${$(23)}::int, ${$(24)}, ${$(25)}, ${$(26)}::text)`;
}
function insertValues(t: NewTask, finished?: FinishedWrite): unknown[] {
  return [
    t.id,
    t.ownerId,
    t.sessionId,
    t.era,
    t.toolName,
    finished ? finished.statusMessage : (t.statusMessage ?? null),
    t.ttlMs,
    t.pollIntervalMs,
    JSON.stringify(t.requestParams),
    // A finished task holds no lease: the instance that ran its work is named by its task.created row.
    finished ? null : t.instanceId,
    t.leaseMs,
    t.traceContext ? JSON.stringify(t.traceContext) : null,
    t.principal ? JSON.stringify(t.principal) : null,
    t.resumable ?? false,
    t.maxAttempts ?? 1,
    t.idempotencyKey ?? null,
    t.requestHash ?? null,
    t.redrivenFrom ?? null,
    finished ? finished.status : 'working',
    finished?.status === 'completed' ? finished.payload : null,
    finished?.status === 'failed' ? finished.payload : null,
    t.checkpoint ?? null,
    t.attempt ?? 1,
    t.fairnessKey ?? t.ownerId,
    t.limitKey ?? null,
    !finished && t.instanceId === null && t.paused ? 'paused' : null,
  ];
}
/** INSERT of `n` rows (a commit group's creations are one statement), each with its expiry reading. */
function insertStatement(n: number): PreparedStatement {
  const tuples = Array.from({ length: n }, (_, i) => insertTuple(i * INSERT_ARITY)).join(', ');
  return {
    name: n === 1 ? 'mcp_task_insert' : `mcp_task_insert_${n}`,
    text: `INSERT INTO task AS t (${INSERT_COLUMNS}) VALUES ${tuples}
           RETURNING ${SNAPSHOT_COLUMNS}, ${MS_UNTIL_EXPIRY}`,
  };
}
const INSERT_TASK = insertStatement(1);

/**
 * A creation with an Idempotency-Key: the owner's key is unique while its task exists
 * (task_owner_idempotency_idx), so a second creation with it inserts nothing. A concurrent one still
 * committing makes this wait for its outcome (then nothing, or the insert if it rolled back).
 */
const INSERT_KEYED: PreparedStatement = {
  name: 'mcp_task_insert_keyed',
  text: `INSERT INTO task AS t (${INSERT_COLUMNS}) VALUES ${insertTuple(0)}
         ON CONFLICT (owner_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
         RETURNING ${SNAPSHOT_COLUMNS}`,
};

/** The task an owner's Idempotency-Key names, with the hash of the call that created it. */
const FIND_KEYED = `SELECT ${SNAPSHOT_COLUMNS}, request_hash FROM task WHERE owner_id = $1 AND idempotency_key = $2`;

/** How a keyed creation ended: this call's new task, or the one the key already named. */
export interface KeyedCreation {
  task: TaskSnapshot;
  /** True when this call inserted it (its work must start); false for an earlier call's task. */
  created: boolean;
  /** The hash of the tool and arguments the task was created with. */
  requestHash: string | null;
}

/** The row a creation with a freshly minted id finds already there: the one an earlier attempt committed. */
const FIND_CREATED: PreparedStatement = {
  name: 'mcp_task_find_created',
  text: `SELECT ${SNAPSHOT_COLUMNS} FROM task WHERE id = $1 AND owner_id = $2 AND tool_name = $3`,
};

/** The key's task was deleted between the conflict and the read: try the insert again. */
class KeyFreedAgain extends Error {}

interface Creation {
  task: NewTask;
  limits: CreationLimits;
  /** Who asked for it (the audit trail's actor, principal, request): a group runs in one caller's context. */
  audit: AuditContext;
  /** Set when the task's work has ended already (insertFinished): the final state it is created in. */
  finished?: FinishedWrite;
  /** Decides where the task runs as its write is sent (see insertWithLimits); run once. */
  place?: (task: NewTask) => void;
}

/** A committed creation, with the database's reading of how long its ttl has left (for caching it). */
export interface Created {
  task: TaskSnapshot;
  expiry: ExpiryReading;
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
  private readonly creations: CommitGroupQueue<Creation, Created>;

  constructor(
    private readonly dataSource: DataSource,
    private readonly config: TasksConfig,
    private readonly transactions: TaskTransactions,
    private readonly publisher: TaskChangePublisher,
    groups: TaskCommitGroups,
  ) {
    // Creation groups queue behind the creation lock anyway: one in flight, the next one filling up.
    this.creations = groups.queue('create', {
      maxInFlight: 1,
      runGroup: (entries) => this.insertGroup(entries),
      runOne: (c) => inAuditContext(c.audit, () => this.insertAlone(c)),
      prepare: (entries) => {
        for (const c of entries) {
          c.place?.(c.task);
          c.place = undefined;
        }
      },
    });
  }

  /**
   * Inserts a task unless a creation limit is reached: N parallel creates against a limit of L leave
   * exactly min(N, L) live tasks, and each refused one gets its limit's error. Creations arriving together
   * are committed as a group (insertGroup); a group that cannot take them all runs each one alone.
   * `place`, when given, is called with the row just before it is sent (not when the creation starts
   * waiting for its group), and may lease it to an instance: a worker slot reserved for the task is then
   * held for the write's own round trips only, not while earlier groups commit.
   */
  async insertWithLimits(
    t: NewTask,
    limits: CreationLimits,
    place?: (task: NewTask) => void,
  ): Promise<TaskSnapshot> {
    return (await this.creations.submit({ task: t, limits, audit: captureAuditContext(), place })).task;
  }

  /**
   * A task whose work has ended already (a required tool that finished inside the inline window), created
   * in its final state under the same limits and in the same commit groups as insertWithLimits: one write
   * where a create and then the run's outcome took two (each its transaction, row version, audit row and
   * notification). The audit trail and the bus still see both changes from that one transaction: created
   * (on `t.instanceId`, the instance that ran the work), then finished, as the worker's. A result or error
   * PostgreSQL cannot store (a NUL character) is refused with UnstorableValueError before anything is sent:
   * the caller then takes the two-step path, whose outcome recorder fails the task saying why.
   */
  async insertFinished(t: NewTask, outcome: FinishedOutcome, limits: CreationLimits): Promise<Created> {
    const statusMessage = outcome.status === 'failed' ? outcome.error.message : null;
    const payload =
      outcome.status === 'completed'
        ? storableOutcomeJson(outcome.result, 'result', statusMessage)
        : storableOutcomeJson(outcome.error, 'error', statusMessage);
    return this.creations.submit({
      task: t,
      limits,
      audit: captureAuditContext(),
      finished: { status: outcome.status, statusMessage, payload },
    });
  }

  /**
   * Publishes a creation inside its transaction: a live one as created (and, queued, announced to the
   * claimers); a finished one as the create and the outcome it stands for, in that order.
   */
  private async announce(m: SqlTx, task: TaskSnapshot, c: Creation): Promise<void> {
    if (!c.finished) {
      await this.publisher.publish(m, task, null);
      await this.publisher.announceQueued(m, task);
      return;
    }
    const created: TaskSnapshot = Object.freeze({
      ...task,
      status: 'working',
      statusMessage: c.task.statusMessage ?? null,
      result: null,
      error: null,
      instanceId: c.task.instanceId,
    });
    await this.publisher.publish(m, created, null);
    // The outcome is the run's, as the runner would have recorded it.
    await this.publisher.publish(m, task, 'working', { actor: 'worker' });
  }

  /**
   * A creation with an Idempotency-Key (`t.idempotencyKey` and `t.requestHash` set), always alone: never in
   * a commit group, whose multi-row INSERT one conflicting key would fail for every member. Inserted →
   * checked against the creation limits exactly like insertAlone. The key already taken by this owner →
   * that task, whatever its hash (the caller compares). Another owner's key never conflicts.
   */
  insertKeyed(t: NewTask, limits: CreationLimits): Promise<KeyedCreation> {
    if (!t.idempotencyKey || !t.requestHash) throw new Error('insertKeyed needs an idempotency key and hash');
    return this.transactions.untilKnown(() => this.insertKeyedOnce(t, limits));
  }

  /**
   * One attempt of insertKeyed. A row with this creation's own id is one an earlier attempt committed
   * without hearing back: still `created`, so its work starts once.
   */
  private async insertKeyedOnce(t: NewTask, limits: CreationLimits, freed = 0): Promise<KeyedCreation> {
    try {
      return await this.transactions.tx(async (m) => {
        const rows = await m.first<Row>(INSERT_KEYED, insertValues(t));
        if (rows.length === 0) {
          const [row] = await m.query<Row>(FIND_KEYED, [t.ownerId, t.idempotencyKey]);
          // Deleted between the conflict and the read (the janitor removed its expired task): the key is
          // free again, and the next attempt inserts.
          if (!row) throw new KeyFreedAgain();
          const task = rowToSnapshot(row);
          return {
            task,
            created: task.id === t.id,
            requestHash: (row.request_hash as string | null) ?? null,
          };
        }
        const task = rowToSnapshot(rows[0]);
        this.checkLimitsAtCommit(m, t.ownerId, limits);
        await this.publisher.publish(m, task, null, { detail: { idempotencyKey: t.idempotencyKey } });
        await this.publisher.announceQueued(m, task);
        return { task, created: true, requestHash: t.requestHash ?? null };
      });
    } catch (err) {
      if (err instanceof KeyFreedAgain && freed < 3) return this.insertKeyedOnce(t, limits, freed + 1);
      throw this.creationRefusal(err, limits);
    }
  }

  /**
   * One creation in its own transaction. The row goes in first; the round trip that commits then takes the
   * creation advisory lock and checks the limits against the usage counters (which count a creation at its
   * commit), so the lock is held for that one round trip only. Creations checked before this one have
   * committed, so the counts cannot miss one. A refusal rolls the insert back. See migration
   * TaskUsageCounters.
   */
  private insertAlone(c: Creation): Promise<Created> {
    return this.transactions.untilKnown(() => this.insertOnce(c));
  }

  /**
   * One attempt of insertAlone. The id is minted for this creation, so a duplicate of it can only be the
   * row an earlier attempt (or the commit group it was in) committed without hearing back: that row is the
   * answer, not an error.
   */
  private async insertOnce(c: Creation): Promise<Created> {
    const { task: t, limits } = c;
    const measuredAt = performance.now();
    try {
      return await this.transactions.tx(async (m) => {
        const rows = await m.first<Row>(INSERT_TASK, insertValues(t, c.finished));
        const task = rowToSnapshot(rows[0]);
        this.checkLimitsAtCommit(m, t.ownerId, limits);
        await this.announce(m, task, c);
        return { task, expiry: expiryOf(rows[0], measuredAt) };
      });
    } catch (err) {
      const e = err as { code?: unknown; constraint?: unknown };
      if (e.code === '23505' && e.constraint === 'PK_task') {
        const [row] = await runPrepared<Row>(this.dataSource, FIND_CREATED, [t.id, t.ownerId, t.toolName]);
        // No reading of the database's clock came with it: an expiry of 0 keeps it out of any cache.
        if (row) return { task: rowToSnapshot(row), expiry: { measuredAt, msUntilExpiry: 0 } };
      }
      throw this.creationRefusal(err, limits);
    }
  }

  /** The limits check of a lone creation, in the round trip that commits it (under the creation lock). */
  private checkLimitsAtCommit(m: SqlTx, ownerId: string, limits: CreationLimits): void {
    m.atCommit(`SELECT pg_advisory_xact_lock(${AdvisoryLockKey.TaskCreation})`);
    m.atCommit('SELECT task_check_creation_limits($1, $2::int, $3::int, $4::int)', [
      ownerId,
      limits.maxPerOwner,
      limits.maxRetainedPerOwner,
      limits.maxTotal,
    ]);
  }

  /** A limit the commit-time check raised becomes its TaskError; anything else stays as it is. */
  private creationRefusal(err: unknown, limits: CreationLimits): unknown {
    const limit = LIMIT_SQLSTATES[String((err as { code?: unknown }).code)];
    return limit ? limitRefusal(limit, limits) : err;
  }

  /**
   * Several creations in one transaction, the creation lock held from its first round trip to its commit:
   * one multi-row INSERT (a bulk transaction, so a statement trigger counts the rows at once, in the
   * counters' key order: migration TaskUsageBulkInsert), then the limits checked once per owner against
   * counters that already include the group. A group passes only if every owner's count, and the total,
   * still fit with all of its rows in, so each creation in it fits too; otherwise the whole group rolls back
   * and each creation runs alone (insertAlone), which gives each its exact answer.
   */
  private async insertGroup(entries: Creation[]): Promise<Created[]> {
    const measuredAt = performance.now();
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
          entries.flatMap((e) => insertValues(e.task, e.finished)),
        );
        const byId = new Map(rows.map((r) => [r.id as string, r]));
        // The strictest limits any entry of an owner carries (they come from one configuration).
        const owners = new Map<string, CreationLimits>();
        for (const { task, limits } of entries) {
          const seen = owners.get(task.ownerId);
          owners.set(task.ownerId, seen ? strictest(seen, limits) : limits);
        }
        const total = Math.min(...entries.map((e) => e.limits.maxTotal));
        // The counters hold this group's rows already: "refused when count >= limit" must become > limit.
        // A finished row counts as retained, whose check keeps ">=": a group that fills the retained limit
        // exactly is refused and its entries run alone, each with its exact answer.
        for (const [owner, l] of owners) {
          m.atCommit('SELECT task_check_creation_limits($1, $2::int, $3::int, $4::int)', [
            owner,
            oneMore(l.maxPerOwner),
            l.maxRetainedPerOwner,
            oneMore(total),
          ]);
        }
        const created = entries.map((c) => {
          const row = byId.get(c.task.id);
          if (!row) throw new Error(`commit group: no row came back for task ${c.task.id}`);
          return { c, task: rowToSnapshot(row), expiry: expiryOf(row, measuredAt) };
        });
        for (const { c, task } of [...created].sort((a, b) => bySession(a.task, b.task))) {
          await inAuditContext(c.audit, () => this.announce(m, task, c));
        }
        return created.map(({ task, expiry }) => ({ task, expiry }));
      },
    );
  }
}
