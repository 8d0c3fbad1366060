import { Injectable } from '@nestjs/common';
import { isDeepStrictEqual } from 'node:util';
import { DataSource } from 'typeorm';
import { PgBusService } from '../bus/pg-bus.service.js';
import { hasNul, jsonHasNul, unstorableText, UnstorableValueError } from '../common/storable-text.js';
import { runPrepared, type PreparedStatement } from '../database/prepared-query.js';
import { CommitOutcomeUnknownError, inTransaction, type SqlTx } from '../database/sql-transaction.js';
import type { StoredTraceContext } from '../telemetry/trace-context.js';
import { CommitGroupQueue, ON_ITS_OWN } from './commit-group.js';
import type { ListPosition } from './task-ids.js';
import { canTransition, isLive, LIVE_STATUSES, TERMINAL_STATUSES, type TaskStatus } from './task-state.js';
import {
  inputKeyFor,
  LOCAL_INPUT_KEY,
  type InputRequest,
  type TaskChange,
  type TaskEra,
  type TaskErrorPayload,
  type TaskSnapshot,
} from './task.types.js';
import { TaskError, TaskErrorCode } from './tasks.errors.js';
import { UnresolvedWriteError } from './unresolved-write.js';
import { DatabaseConfig } from '../database/database.config.js';
import { TasksConfig } from './tasks.config.js';

/** The bus channel every task change goes out on (ids and status only; receivers re-read). */
export const TASK_CHANNEL = 'mcp_task_changed';

/** Fixed advisory-lock keys; nothing else in the database uses them. */
export const TASK_CREATE_LOCK_KEY = 7_140_512_101;
export const JANITOR_LOCK_KEY = 7_140_512_102;

/** Timestamps are kept at millisecond precision so list cursors (JS Dates) compare exactly. */
const NOW_MS = `date_trunc('milliseconds', now())`;
const LIVE_SQL = `('working', 'input_required')`;
/** expires_at − now() in milliseconds, for a written row (see ExpiryReading). */
const MS_UNTIL_EXPIRY = `(extract(epoch FROM (t.expires_at - now())) * 1000)::float8 AS ms_until_expiry`;
const TERMINAL_SQL = `('completed', 'failed', 'cancelled')`;

/**
 * The columns a snapshot is made of (see rowToSnapshot). Named, not `*`: a prepared statement's result shape
 * is fixed when it is planned, so a column added by a later migration must not change it under a live pool.
 */
const SNAPSHOT_COLUMNS = `id, owner_id, session_id, era, tool_name, status, status_message, created_at,
       last_updated_at, ttl_ms, expires_at, poll_interval_ms, request_params, result, error, input_requests,
       input_responses, handler_state, input_rounds, generation, instance_id, lease_expires_at, trace_context`;

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

export interface NewTask {
  id: string;
  ownerId: string;
  sessionId: string | null;
  era: TaskEra;
  toolName: string;
  ttlMs: number;
  pollIntervalMs: number;
  requestParams: Record<string, unknown>;
  /** The instance that will run it (its lease starts now). */
  instanceId: string;
  leaseMs: number;
  statusMessage?: string | null;
  traceContext?: StoredTraceContext | null;
}

export interface CreationLimits {
  maxPerOwner: number;
  maxTotal: number;
  /** Finished (completed, failed, cancelled) tasks one owner may keep. */
  maxRetainedPerOwner: number;
}

export interface InputLimits {
  maxRounds: number;
  maxKeys: number;
  maxStateBytes: number;
}

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

/**
 * Where a task written to a terminal state stands against its ttl, by the database clock: `msUntilExpiry`
 * is expires_at − now() of the writing transaction, `measuredAt` a performance.now() taken before that
 * transaction began, so measuredAt + msUntilExpiry is no later than the expiry (FinishedTaskCache.put).
 */
export interface ExpiryReading {
  measuredAt: number;
  msUntilExpiry: number;
}

export type WorkerWriteResult =
  | { applied: true; task: TaskSnapshot; previous: TaskStatus; expiry?: ExpiryReading }
  | { applied: false; reason: WorkerWriteRefusal; task: TaskSnapshot | null };

export type ParkResult =
  | { applied: true; task: TaskSnapshot; limitBroken: string | null }
  | { applied: false; reason: WorkerWriteRefusal; task: TaskSnapshot | null };

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

/** What one lease renewal found for a run of this instance. */
export interface LeaseState {
  generation: number;
  /** False when the row was locked by another transaction: still held, renewed on the next round. */
  renewed: boolean;
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

export type JanitorStep = 'expire' | 'lease_lapsed' | 'instance_gone' | 'delete';

export interface SweptTask {
  id: string;
  toolName: string;
  status: TaskStatus;
  createdAt: Date;
  traceContext: StoredTraceContext | null;
}

type Row = Record<string, unknown>;

/**
 * Runs inside the transaction that changes a task, after the write: whatever it writes commits with the
 * change or not at all (an outbox, e.g. the handshake era's logged status notification).
 */
export type TaskChangeHook = (tx: SqlTx, task: TaskSnapshot, previous: TaskStatus | null) => Promise<void>;

/** A task with its change version (see Task.changeVersion). */
export interface VersionedTask {
  task: TaskSnapshot;
  version: number;
}

/** TypeORM answers UPDATE/DELETE … RETURNING on postgres with [rows, rowCount], other statements with rows. */
function returned(result: unknown): Row[] {
  const r = result as unknown[];
  return (Array.isArray(r[0]) ? r[0] : r) as Row[];
}

function toNumber(v: unknown): number {
  return typeof v === 'number' ? v : Number(v);
}

/** Maps a raw `task` row (snake_case, as RETURNING * gives it) to the immutable snapshot. */
export function rowToSnapshot(r: Row): TaskSnapshot {
  return Object.freeze({
    id: r.id as string,
    ownerId: r.owner_id as string,
    sessionId: (r.session_id as string | null) ?? null,
    era: r.era as TaskEra,
    toolName: r.tool_name as string,
    status: r.status as TaskStatus,
    statusMessage: (r.status_message as string | null) ?? null,
    createdAt: r.created_at as Date,
    lastUpdatedAt: r.last_updated_at as Date,
    ttlMs: toNumber(r.ttl_ms),
    expiresAt: r.expires_at as Date,
    pollIntervalMs: toNumber(r.poll_interval_ms),
    requestParams: (r.request_params as Record<string, unknown>) ?? {},
    result: (r.result as Record<string, unknown> | null) ?? null,
    error: (r.error as TaskErrorPayload | null) ?? null,
    inputRequests: (r.input_requests as Record<string, InputRequest>) ?? {},
    inputResponses: (r.input_responses as Record<string, unknown>) ?? {},
    handlerState: r.handler_state ?? null,
    inputRounds: toNumber(r.input_rounds),
    generation: toNumber(r.generation),
    instanceId: (r.instance_id as string | null) ?? null,
    leaseExpiresAt: (r.lease_expires_at as Date | null) ?? null,
    traceContext: (r.trace_context as StoredTraceContext | null) ?? null,
  });
}

/** The mutable part of a row that one write replaces as a whole. */
interface NextState {
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
interface LockedTask {
  task: TaskSnapshot;
  pastTtl: boolean;
}

type LeaseChange = { kind: 'keep' } | { kind: 'clear' } | { kind: 'renew'; ms: number };

const INSERT_COLUMNS = `id, owner_id, session_id, era, tool_name, status, status_message, created_at,
  last_updated_at, ttl_ms, expires_at, poll_interval_ms, request_params, instance_id, lease_expires_at,
  trace_context`;
/** Values one new row takes (see insertValues), and the row they make, from placeholder $offset+1 on. */
const INSERT_ARITY = 12;
function insertTuple(offset: number): string {
  const $ = (n: number): string => `$${n + offset}`;
  return `(${$(1)}, ${$(2)}, ${$(3)}, ${$(4)}, ${$(5)}, 'working', ${$(6)}, ${NOW_MS}, ${NOW_MS}, ${$(7)}::int,
           ${NOW_MS} + ${$(7)}::int * interval '1 millisecond', ${$(8)}, ${$(9)}::jsonb, ${$(10)},
           now() + ${$(11)}::int * interval '1 millisecond', ${$(12)}::jsonb)`;
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

/** The SQLSTATEs task_check_creation_limits raises (migration TaskUsageCounters), by the limit hit. */
const LIMIT_SQLSTATES: Record<string, 'owner_live' | 'owner_retained' | 'total_live'> = {
  MCPLO: 'owner_live',
  MCPLR: 'owner_retained',
  MCPLT: 'total_live',
};

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

const EXPIRED: TaskErrorPayload = { code: -32603, message: 'Task expired' };

/**
 * Attempts of a write whose COMMIT answer was lost (CommitOutcomeUnknownError) before its caller is told
 * so: each later attempt first recognises the work an earlier one landed (see insertAlone, finishAlone).
 */
const COMMIT_UNKNOWN_ATTEMPTS = 3;

/** The row a creation with a freshly minted id finds already there: the one an earlier attempt committed. */
const FIND_CREATED: PreparedStatement = {
  name: 'mcp_task_find_created',
  text: `SELECT ${SNAPSHOT_COLUMNS} FROM task WHERE id = $1 AND owner_id = $2 AND tool_name = $3`,
};
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
const WORKER_LOST_MESSAGE = 'worker lost: the server running this task stopped';

/** kind: what the group committed; size: its entries; fellBack: it failed and each entry ran alone. */
export type CommitGroupListener = (kind: 'create' | 'finish', size: number, fellBack: boolean) => void;

interface Creation {
  task: NewTask;
  limits: CreationLimits;
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
}

/**
 * Change hooks lock per-session rows (the SSE stream counter): every transaction that publishes changes of
 * several sessions does so in this one order, so none can wait for another in a circle over them.
 */
function bySessionRow(a: Row, b: Row): number {
  return ((a.session_id as string | null) ?? '').localeCompare((b.session_id as string | null) ?? '');
}
function bySession(a: TaskSnapshot, b: TaskSnapshot): number {
  return (a.sessionId ?? '').localeCompare(b.sessionId ?? '');
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

function expiryOf(row: Row, measuredAt: number): ExpiryReading {
  return { measuredAt, msUntilExpiry: toNumber(row.ms_until_expiry) };
}

function strictest(a: CreationLimits, b: CreationLimits): CreationLimits {
  return {
    maxPerOwner: Math.min(a.maxPerOwner, b.maxPerOwner),
    maxTotal: Math.min(a.maxTotal, b.maxTotal),
    maxRetainedPerOwner: Math.min(a.maxRetainedPerOwner, b.maxRetainedPerOwner),
  };
}

/** limit + 1, within PostgreSQL's int (a limit that large never binds anyway). */
function oneMore(limit: number): number {
  return Math.min(limit + 1, 2_147_483_647);
}

/**
 * The only code that reads or writes the task table, and the only code that takes its locks. Every change
 * is one transaction: lock_timeout, SELECT … FOR UPDATE, the liveness and fencing checks, the write, and the
 * bus notification issued inside the transaction so PostgreSQL delivers it at commit (and never on rollback).
 * Owner-facing reads and writes filter by owner in SQL, so another owner's task looks exactly like no task.
 */
@Injectable()
export class TasksRepository {
  private readonly changeHooks: TaskChangeHook[] = [];

  /** Creations that arrive while another group of them commits go together (see insertGroup). */
  private readonly creations: CommitGroupQueue<Creation, TaskSnapshot>;
  /** Worker outcomes likewise (see finishGroup). */
  private readonly outcomes: CommitGroupQueue<Outcome, WorkerWriteResult>;
  private readonly groupListeners: CommitGroupListener[] = [];
  /** Transactions whose deferred counter triggers are already queued to fire before their outbox rows. */
  private readonly countedNow = new WeakSet<SqlTx>();
  /** The transaction id of each transaction that has written a task row (see write, knownTx). */
  private readonly xacts = new WeakMap<SqlTx, string>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly bus: PgBusService,
    private readonly config: TasksConfig,
    database: DatabaseConfig,
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
    this.outcomes = new CommitGroupQueue({
      maxGroup,
      // Outcomes take no shared lock: several groups at once keep a finished run's wait short (a read of
      // the task waits for it), leaving half the pool to everything else.
      maxInFlight: Math.max(1, Math.floor(database.DB_POOL_MAX / 2)),
      runGroup: (entries) => this.finishGroup(entries),
      runOne: (o) => this.finishAlone(o.fence, o.to, o.fields, o.payload),
      onGroup: (size, fellBack) => this.groupListeners.forEach((l) => l('finish', size, fellBack)),
    });
  }

  /** Told of every commit group once it has run (the metrics). */
  onCommitGroup(listener: CommitGroupListener): void {
    this.groupListeners.push(listener);
  }

  // ---------------------------------------------------------------- creation

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
    return this.untilKnown(() => this.insertOnce(t, limits));
  }

  /**
   * One attempt of insertAlone. The id is minted for this creation, so a duplicate of it can only be the
   * row an earlier attempt (or the commit group it was in) committed without hearing back: that row is the
   * answer, not an error.
   */
  private async insertOnce(t: NewTask, limits: CreationLimits): Promise<TaskSnapshot> {
    try {
      return await this.tx(async (m) => {
        const rows = await m.first<Row>(INSERT_TASK, insertValues(t));
        const task = rowToSnapshot(rows[0]);
        m.atCommit(`SELECT pg_advisory_xact_lock(${TASK_CREATE_LOCK_KEY})`);
        m.atCommit('SELECT task_check_creation_limits($1, $2::int, $3::int, $4::int)', [
          t.ownerId,
          limits.maxPerOwner,
          limits.maxRetainedPerOwner,
          limits.maxTotal,
        ]);
        await this.publish(m, task, null);
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
   * Runs `attempt` again while its COMMIT's answer is lost, up to COMMIT_UNKNOWN_ATTEMPTS times. Only for
   * writes whose attempts recognise what an earlier one landed, so a second attempt never writes twice.
   */
  private async untilKnown<T>(attempt: () => Promise<T>): Promise<T> {
    for (let n = 1; ; n++) {
      try {
        return await attempt();
      } catch (err) {
        if (!(err instanceof CommitOutcomeUnknownError) || n >= COMMIT_UNKNOWN_ATTEMPTS) throw err;
      }
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
        advisoryLock: TASK_CREATE_LOCK_KEY,
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
        for (const task of [...created].sort(bySession)) await this.publish(m, task, null);
        return created;
      },
    );
  }

  // ---------------------------------------------------------------- owner-scoped reads

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

  /** Adds a hook run inside every task-changing transaction (see TaskChangeHook). */
  addChangeHook(hook: TaskChangeHook): void {
    this.changeHooks.push(hook);
  }

  /** Live tasks by status, for the mcp_tasks_active gauge. */
  async countLiveByStatus(): Promise<Record<string, number>> {
    const rows = await this.dataSource.query<Row[]>(
      `SELECT status, count(*) AS n FROM task WHERE status IN ${LIVE_SQL} GROUP BY status`,
    );
    const out: Record<string, number> = { working: 0, input_required: 0 };
    for (const r of rows) out[r.status as string] = toNumber(r.n);
    return out;
  }

  /**
   * How far behind the janitor is, in seconds (0 when nothing is due): `expire`, since the oldest live task
   * passed its ttl; `delete`, since the oldest finished task passed ttl + grace. Both use the task_expires_idx.
   */
  async janitorLag(graceMs: number): Promise<{ expire: number; delete: number }> {
    const [r] = await this.dataSource.query<Row[]>(
      `SELECT
         COALESCE(EXTRACT(EPOCH FROM now() - (SELECT min(expires_at) FROM task
            WHERE status IN ${LIVE_SQL} AND expires_at <= now())), 0) AS expire,
         COALESCE(EXTRACT(EPOCH FROM now() - (SELECT min(expires_at) + $1::int * interval '1 millisecond'
            FROM task WHERE status IN ${TERMINAL_SQL}
              AND expires_at + $1::int * interval '1 millisecond' <= now())), 0) AS delete`,
      [graceMs],
    );
    return { expire: toNumber(r.expire), delete: toNumber(r.delete) };
  }

  // ---------------------------------------------------------------- owner-scoped writes

  /**
   * Cancels a live task (working or input_required). A terminal task is returned unchanged with
   * applied=false; null means not found (or not this owner's).
   */
  async cancelIfLive(ownerId: string, id: string, message: string): Promise<CancelResult | null> {
    return this.knownTx(async (m) => {
      const locked = await this.lock(m, id, ownerId);
      if (!locked) return null;
      const current = locked.task;
      const expired = await this.expireLockedIfDue(m, locked);
      if (expired) return { applied: false, task: expired, expired: true };
      if (!isLive(current.status)) return { applied: false, task: current };
      const task = await this.transition(m, current, 'cancelled', { statusMessage: message }, true);
      return { applied: true, task };
    });
  }

  /** Lazy expiry on read: a live task past created + ttl is failed "Task expired" right away. */
  async expireIfDue(ownerId: string, id: string): Promise<CancelResult | null> {
    return this.knownTx(async (m) => {
      const locked = await this.lock(m, id, ownerId);
      if (!locked) return null;
      const current = locked.task;
      const task = await this.expireLockedIfDue(m, locked);
      return task ? { applied: true, task, expired: true } : { applied: false, task: current };
    });
  }

  /**
   * tasks/update: merges answers into a parked task. Keys that are not outstanding (unknown, already
   * answered, from an earlier round) are ignored. While keys remain the task stays input_required; when the
   * last one arrives it goes back to working with a new generation, leased to `instanceId`, which is then
   * expected to resume the handler. A task that is not parked ignores every answer.
   */
  async mergeInputResponses(
    ownerId: string,
    id: string,
    responses: Record<string, unknown>,
    resume: { instanceId: string; leaseMs: number },
  ): Promise<MergeResult | null> {
    return this.knownTx(async (m) => {
      const locked = await this.lock(m, id, ownerId);
      if (!locked) return null;
      const current = locked.task;
      const keys = Object.keys(responses);
      // Input after created + ttl must not revive the task, swept or not: it expires here instead.
      const expired = await this.expireLockedIfDue(m, locked);
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
        const task = await this.write(
          m,
          current,
          { inputRequests: remaining, inputResponses },
          { kind: 'keep' },
        );
        return { task, accepted, ignored, resumed: false };
      }
      const task = await this.transition(
        m,
        current,
        'working',
        { inputRequests: {}, inputResponses, statusMessage: null, instanceId: resume.instanceId },
        true,
        { kind: 'renew', ms: resume.leaseMs },
      );
      return { task, accepted, ignored, resumed: true };
    });
  }

  // ---------------------------------------------------------------- worker writes (fenced)

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

  /** Handshake-era input over SSE: the live worker flips the visible status without giving the task up. */
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
    return this.knownTx(async (m) => {
      const held = await this.lockForWorker(m, fence);
      if ('refused' in held) return held.refused;
      const current = held.current;
      const broken = checkInputRound(current, requests, handlerState, limits);
      if (broken) {
        const task = await this.transition(
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
      const task = await this.transition(
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
    return this.knownTx(async (m) => {
      const held = await this.lockForWorker(m, fence);
      if ('refused' in held) return held.refused;
      const current = held.current;
      // While a handshake-era worker waits for an answer, its input_required message stays.
      if (current.status !== 'working' || current.statusMessage === statusMessage) {
        return { applied: true, task: current, previous: current.status };
      }
      const task = await this.write(m, current, { statusMessage }, { kind: 'keep' });
      await this.publish(m, task, current.status);
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
    return this.tx(async (m) => {
      const expired = await this.failRows(
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

  // ---------------------------------------------------------------- janitor

  /**
   * One bounded janitor batch, in its own transaction, under the janitor's transaction-scoped advisory
   * lock. Returns null when another instance holds the lock (this run stops), else the rows handled.
   * Rows are claimed with FOR UPDATE SKIP LOCKED, so a batch never waits behind live traffic.
   */
  async janitorBatch(
    step: JanitorStep,
    opts: { batchSize: number; graceMs: number; selfInstanceId: string; staleInstanceMs: number },
  ): Promise<SweptTask[] | null> {
    return this.tx(async (m) => {
      const [{ ok }] = await m.query<Row>('SELECT pg_try_advisory_xact_lock($1) AS ok', [JANITOR_LOCK_KEY]);
      if (ok !== true) return null;
      if (step === 'delete') {
        const rows = returned(
          await m.query(
            `DELETE FROM task WHERE id IN (
             SELECT id FROM task
             WHERE status IN ${TERMINAL_SQL} AND expires_at + $2::int * interval '1 millisecond' <= now()
             ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
           RETURNING id, tool_name, status, created_at, trace_context`,
            [opts.batchSize, opts.graceMs],
          ),
        );
        return rows.map(toSwept);
      }
      return this.failBatch(m, step, opts);
    }, true);
  }

  /** Startup recovery outside the janitor lock: idempotent (SKIP LOCKED, status checked in SQL). */
  async failOrphaned(
    selfInstanceId: string,
    staleInstanceMs: number,
    batchSize: number,
  ): Promise<SweptTask[]> {
    return this.tx(
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
    let error: TaskErrorPayload;
    switch (step) {
      case 'expire':
        select = `SELECT id, status AS prev FROM task WHERE status IN ${LIVE_SQL} AND expires_at <= now()
                  ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED`;
        params = [opts.batchSize];
        error = EXPIRED;
        break;
      case 'lease_lapsed':
        select = `SELECT id, status AS prev FROM task WHERE status IN ${LIVE_SQL} AND instance_id IS NOT NULL
                  AND lease_expires_at < now() LIMIT $1 FOR UPDATE SKIP LOCKED`;
        params = [opts.batchSize];
        error = { code: -32603, message: WORKER_LOST_MESSAGE };
        break;
      case 'instance_gone':
        // The instance that holds the task is stopped, silent for too long, or unknown: it will never finish it.
        select = `SELECT t.id, t.status AS prev FROM task t LEFT JOIN service_instance si ON si.id = t.instance_id
                  WHERE t.status IN ${LIVE_SQL} AND t.instance_id IS NOT NULL AND t.instance_id <> $2
                    AND (si.id IS NULL OR si.stopped_at IS NOT NULL
                         OR si.heartbeat_at < now() - $3::int * interval '1 millisecond')
                  LIMIT $1 FOR UPDATE OF t SKIP LOCKED`;
        params = [opts.batchSize, opts.selfInstanceId, opts.staleInstanceMs];
        error = { code: -32603, message: WORKER_LOST_MESSAGE };
        break;
    }
    return this.failRows(m, select, params, error);
  }

  /** Fails the live rows `select` claims (id, prev), bumping their generation, and publishes each change. */
  private async failRows(
    m: SqlTx,
    select: string,
    params: unknown[],
    error: TaskErrorPayload,
  ): Promise<SweptTask[]> {
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
    const swept: SweptTask[] = [];
    rows.sort(bySessionRow);
    for (const r of rows) {
      const task = rowToSnapshot(r);
      await this.publish(m, task, r.previous_status as TaskStatus);
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

  // ---------------------------------------------------------------- internals

  /**
   * A task transaction. `bulk` marks statements that change many rows at once (janitor batches, rescues,
   * expiries found by lease renewal): the usage counters are then kept by statement triggers, which lock
   * the counter rows in key order (see migration TaskUsageCounters).
   */
  private async tx<T>(work: (m: SqlTx) => Promise<T>, bulk = false): Promise<T> {
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
  private async knownTx<T>(work: (m: SqlTx) => Promise<T>): Promise<T> {
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

  /** Locks the task's row (FOR UPDATE) and reads it, with whether it is past created + ttl (database clock). */
  private async lock(m: SqlTx, id: string, ownerId: string | null): Promise<LockedTask | null> {
    const [row] =
      ownerId === null ? await m.first<Row>(LOCK_BY_ID, [id]) : await m.first<Row>(LOCK_OWNED, [id, ownerId]);
    return row ? { task: rowToSnapshot(row), pastTtl: row.due_now === true } : null;
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
    const locked = await this.lock(m, fence.taskId, null);
    if (!locked) return { refused: { applied: false, reason: 'gone', task: null } };
    const current = locked.task;
    if (!this.isCurrent(current, fence)) {
      return { refused: { applied: false, reason: 'not_current', task: current } };
    }
    const expired = await this.expireLockedIfDue(m, locked);
    if (expired) return { refused: { applied: false, reason: 'expired', task: expired } };
    return { current };
  }

  private isCurrent(t: TaskSnapshot, fence: WorkerFence): boolean {
    return isLive(t.status) && t.generation === fence.generation && t.instanceId === fence.instanceId;
  }

  /**
   * Inside a write's transaction, with the row locked: a live task past created + ttl by the database clock
   * is failed "Task expired" (as the janitor would) and returned; null when it is not due. Every write path
   * calls this first, so no write can act on (or revive) a task whose ttl has run out but was not swept yet.
   */
  private async expireLockedIfDue(m: SqlTx, locked: LockedTask): Promise<TaskSnapshot | null> {
    const current = locked.task;
    if (!isLive(current.status) || !locked.pastTtl) return null;
    return this.transition(m, current, 'failed', { statusMessage: 'Task expired', error: EXPIRED }, true);
  }

  /**
   * A run's outcome: the one-statement write (FINISH_IF_CURRENT) when the task is still the run's, which is
   * the common case; otherwise, in the same transaction, the general path that locks the row and says why
   * the write was refused (expiring the task if it is due). An outcome holding a NUL character is refused
   * with UnstorableValueError before it joins a group: PostgreSQL would refuse it on every attempt.
   */
  private finishIfCurrent(
    fence: WorkerFence,
    to: 'completed' | 'failed',
    fields: OutcomeFields,
  ): Promise<WorkerWriteResult> {
    const value = to === 'completed' ? fields.result : fields.error;
    const payload = JSON.stringify(value);
    if (hasNul(fields.statusMessage) || jsonHasNul(payload)) {
      const where = hasNul(fields.statusMessage)
        ? 'statusMessage contains a NUL character (\\u0000)'
        : (unstorableText(value, to === 'completed' ? 'result' : 'error') ?? 'it contains a NUL character');
      return Promise.reject(new UnstorableValueError(where));
    }
    return this.outcomes.submit({ fence, to, fields, payload });
  }

  private finishAlone(
    fence: WorkerFence,
    to: 'completed' | 'failed',
    fields: OutcomeFields,
    payload: string,
  ): Promise<WorkerWriteResult> {
    return this.untilKnown(() => this.finishOnce(fence, to, fields, payload));
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
    return this.tx(async (m) => {
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
        await this.publish(m, task, previous);
        return { applied: true, task, previous, expiry: expiryOf(row, measuredAt) };
      }
      const refused = await this.workerWriteIn(m, fence, to, fields);
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
          await this.publish(m, task, previous);
          answers[firstOfTask.get(task.id)!] = {
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

  private async workerWrite(
    fence: WorkerFence,
    to: TaskStatus,
    fields: Partial<NextState>,
  ): Promise<WorkerWriteResult> {
    return this.knownTx((m) => this.workerWriteIn(m, fence, to, fields));
  }

  private async workerWriteIn(
    m: SqlTx,
    fence: WorkerFence,
    to: TaskStatus,
    fields: Partial<NextState>,
  ): Promise<WorkerWriteResult> {
    const held = await this.lockForWorker(m, fence);
    if ('refused' in held) return held.refused;
    const current = held.current;
    if (current.status === to) {
      const task = await this.write(m, current, fields, { kind: 'keep' });
      return { applied: true, task, previous: current.status };
    }
    if (!canTransition(current.status, to)) {
      return { applied: false, reason: 'not_current', task: current };
    }
    const clears: Partial<NextState> = isLive(to) ? {} : { instanceId: null, inputRequests: {} };
    const task = await this.transition(
      m,
      current,
      to,
      { ...clears, ...fields },
      false,
      isLive(to) ? { kind: 'keep' } : { kind: 'clear' },
    );
    return { applied: true, task, previous: current.status };
  }

  /** A checked status change: refuses anything the state machine forbids, then writes and publishes. */
  private async transition(
    m: SqlTx,
    current: TaskSnapshot,
    to: TaskStatus,
    fields: Partial<NextState>,
    bumpGeneration: boolean,
    lease: LeaseChange = isLive(to) ? { kind: 'keep' } : { kind: 'clear' },
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
    await this.publish(m, task, current.status);
    return task;
  }

  private async write(
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
    this.xacts.set(m, rows[0].xact as string);
    return rowToSnapshot(rows[0]);
  }

  private async publish(m: SqlTx, task: TaskSnapshot, previous: TaskStatus | null): Promise<void> {
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
    for (const hook of this.changeHooks) await hook(m, task, previous);
    await this.bus.publish(TASK_CHANNEL, { ...change }, m);
  }
}

/** The error a creation refused at one of its limits answers with. */
function limitRefusal(
  limit: 'owner_live' | 'owner_retained' | 'total_live',
  limits: CreationLimits,
): TaskError {
  switch (limit) {
    case 'owner_live':
      return new TaskError(
        TaskErrorCode.LIMIT_EXCEEDED,
        `Too many live tasks for this caller (TASK_MAX_PER_OWNER = ${limits.maxPerOwner})`,
      );
    case 'owner_retained':
      return new TaskError(
        TaskErrorCode.LIMIT_EXCEEDED,
        `Too many finished tasks kept for this caller (QUOTA_RETAINED_TASKS_PER_OWNER = ${limits.maxRetainedPerOwner}); they are deleted as they expire`,
        undefined,
        {
          quota: 'retained_tasks',
          limit: limits.maxRetainedPerOwner,
          setting: 'QUOTA_RETAINED_TASKS_PER_OWNER',
        },
      );
    case 'total_live':
      return new TaskError(
        TaskErrorCode.LIMIT_EXCEEDED,
        `Too many live tasks on this server (TASK_MAX_TOTAL = ${limits.maxTotal})`,
      );
  }
}

function toSwept(r: Row): SweptTask {
  return {
    id: r.id as string,
    toolName: r.tool_name as string,
    status: r.status as TaskStatus,
    createdAt: r.created_at as Date,
    traceContext: (r.trace_context as StoredTraceContext | null) ?? null,
  };
}

/** The first input limit a round breaks, as the message the failed task will carry; null when it is fine. */
export function checkInputRound(
  current: Pick<TaskSnapshot, 'inputRounds'>,
  requests: Record<string, InputRequest>,
  handlerState: unknown,
  limits: InputLimits,
): string | null {
  const keys = Object.keys(requests ?? {});
  if (keys.length === 0) return 'Invalid input round: no input requests';
  for (const k of keys) {
    if (!LOCAL_INPUT_KEY.test(k))
      return `Invalid input round: bad request key ${JSON.stringify(k.slice(0, 80))}`;
    const req = requests[k];
    if (!req || typeof req.method !== 'string' || req.method.length === 0) {
      return `Invalid input round: request ${k} has no method`;
    }
  }
  if (current.inputRounds + 1 > limits.maxRounds) {
    return `Input limit exceeded: more than TASK_MAX_INPUT_ROUNDS (${limits.maxRounds}) input rounds`;
  }
  if (keys.length > limits.maxKeys) {
    return `Input limit exceeded: ${keys.length} input requests in one round, over TASK_MAX_INPUT_KEYS (${limits.maxKeys})`;
  }
  const stateBytes =
    handlerState === undefined || handlerState === null ? 0 : Buffer.byteLength(JSON.stringify(handlerState));
  if (stateBytes > limits.maxStateBytes) {
    return `Input limit exceeded: handler state of ${stateBytes} bytes, over TASK_MAX_HANDLER_STATE_BYTES (${limits.maxStateBytes})`;
  }
  return null;
}

export { LIVE_STATUSES, TERMINAL_STATUSES };
