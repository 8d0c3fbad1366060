import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { PreparedStatement } from '../../database/prepared-query.js';
import { AdvisoryLockKey } from '../../database/advisory-locks.js';
import type { SqlTx } from '../../database/sql-transaction.js';
import type { LimitsPolicy } from '../../tool-dispatch/tool-limits.js';
import { pausedMessage } from '../task-queue.js';
import { TaskChangePublisher } from './task-change-publisher.js';
import { bySession, NOW_MS, rowToSnapshot, SNAPSHOT_COLUMNS, toNumber, type Row } from './task-row.mapper.js';
import { TaskTransactions } from './task-transactions.js';
import type { TaskSnapshot } from '../task.types.js';

/**
 * A queued task this instance claimed: leased to it at a new generation (every earlier run is fenced out),
 * with what the run needs that the snapshot does not carry.
 */
export interface ClaimedTask {
  task: TaskSnapshot;
  /** The last progress state a run saved (null when none). */
  checkpoint: unknown;
  /** The owner's principal as the creating request saw it (null for tasks created before it was kept). */
  principal: Record<string, unknown> | null;
  /** How long it was claimable before this claim (available_at to now), by the database clock, in ms. */
  waitedMs: number;
}

/** The queue as a gauge reads it: claimable now, and waiting for a later available_at (retry backoffs). */
export interface QueueDepth {
  ready: number;
  delayed: number;
  /** Milliseconds (database clock) until the earliest delayed task becomes claimable; null when none. */
  nextDelayedInMs: number | null;
}

/** The running-attempt text a claimed re-run shows (a first run shows none). */
const RUNNING_MESSAGE = `CASE WHEN t.attempt > 1 THEN 'Running attempt ' || t.attempt ELSE NULL END`;

/** Queued: working, on no instance (the predicate of task_queue_fair_idx). */
const QUEUED = `status = 'working' AND instance_id IS NULL`;
const QUEUED_T = `t.status = 'working' AND t.instance_id IS NULL`;
/** SNAPSHOT_COLUMNS of the row `t` (the fair claim's UPDATE reads another relation with columns of its own). */
const SNAPSHOT_COLUMNS_T = SNAPSHOT_COLUMNS.split(',')
  .map((c) => `t.${c.trim()}`)
  .join(', ');

/**
 * The fair pick and the lease of what it may lease, in one statement run under the claim lock (after it:
 * its snapshot sees every claim that committed before the lock was granted). Up to $1 claimable tasks, in
 * the order fair sharing gives slots out: the fairness key with the fewest tasks running across the cluster
 * first, each task picked counting as one more running for its key, ties to the oldest available_at. It
 * steps from one fairness key to the next on task_queue_fair_idx (a loose index scan: one probe per key with
 * queued work), reads each key's oldest $1 claimable rows from the same index, and counts each such key's
 * running tasks on task_running_fair_idx (only when several keys have work: with one, the counts cannot
 * change the order): the rest of the queue is never read. The tasks in $2 ran here and
 * returned; their outcomes are being written, so they no longer count as running. With TASK_FAIR_SHARE=off
 * every task has the key '', which makes this first come, first served.
 *
 * Picked tasks behind no gate are leased to $3 for $4 ms (generation bumped: every earlier run is fenced
 * out), found by primary key (= ANY of an array: a join with the pick could be planned as a scan of the
 * whole table, which a prepared statement's generic plan did with 10,000 queued rows, 40 ms a claim). Those of a paused tool or of a tool that declares limits are returned in `gated`, for the claim to
 * judge. One row always comes back: a leased task, or nulls when none was leased.
 */
const CLAIM_FAIRLY: PreparedStatement = {
  name: 'mcp_task_claim_fairly',
  text: `WITH RECURSIVE keys(k) AS (
    (SELECT fairness_key FROM task WHERE ${QUEUED} ORDER BY fairness_key LIMIT 1)
    UNION ALL
    SELECT (SELECT fairness_key FROM task WHERE ${QUEUED} AND fairness_key > keys.k ORDER BY fairness_key LIMIT 1)
      FROM keys WHERE keys.k IS NOT NULL),
  cand AS (
    SELECT c.id, c.tool_name, c.limit_key, c.available_at, keys.k,
           row_number() OVER (PARTITION BY keys.k ORDER BY c.available_at, c.id) AS r
      FROM keys CROSS JOIN LATERAL (
        SELECT id, tool_name, limit_key, available_at FROM task
         WHERE fairness_key = keys.k AND ${QUEUED} AND available_at <= now() AND expires_at > now()
         ORDER BY available_at LIMIT $1) c
     WHERE keys.k IS NOT NULL),
  keyed AS (SELECT DISTINCT k FROM cand),
  running AS (
    SELECT d.k,
           CASE WHEN (SELECT count(*) FROM keyed) > 1
                THEN (SELECT count(*) FROM task WHERE fairness_key = d.k AND status = 'working'
                        AND instance_id IS NOT NULL AND id <> ALL($2::text[]))
                ELSE 0 END AS n
      FROM keyed d),
  best AS MATERIALIZED (
    SELECT cand.id AS best_id, cand.tool_name AS best_tool, cand.limit_key AS best_limit_key,
           cand.available_at AS was_available_at,
           EXISTS (SELECT 1 FROM tool_queue q WHERE q.tool_name = cand.tool_name AND q.paused) AS best_paused
      FROM cand JOIN running USING (k)
     ORDER BY running.n + cand.r, cand.available_at, cand.id
     LIMIT $1),
  leased AS (
    UPDATE task t SET instance_id = $3, lease_expires_at = now() + $4::int * interval '1 millisecond',
           generation = t.generation + 1, available_at = NULL, queue_hold = NULL,
           status_message = ${RUNNING_MESSAGE}, last_updated_at = ${NOW_MS}
     WHERE t.id = ANY (ARRAY (SELECT best_id FROM best WHERE best_limit_key IS NULL AND NOT best_paused))
       AND ${QUEUED_T}
    RETURNING ${SNAPSHOT_COLUMNS_T}, t.checkpoint, t.principal,
              greatest(0, extract(epoch FROM (now() - (SELECT was_available_at FROM best WHERE best_id = t.id)))
                * 1000)::float8 AS waited_ms,
              pg_current_xact_id()::text AS xact)
  SELECT leased.*,
         (SELECT jsonb_agg(jsonb_build_object('id', best_id, 'tool', best_tool, 'limitKey', best_limit_key,
                                              'paused', best_paused))
            FROM best WHERE best_limit_key IS NOT NULL OR best_paused) AS gated
    FROM (SELECT 1) AS one LEFT JOIN leased ON true`,
};

/** A picked task the claim judges itself: its tool is paused, or declares limits. */
interface GatedPick {
  id: string;
  tool: string;
  limitKey: string | null;
  paused: boolean;
}

/** Leases the picked tasks to $1 (the claim lock is held: nothing else claims them meanwhile). */
const CLAIM_PICKED: PreparedStatement = {
  name: 'mcp_task_claim_picked',
  text: `WITH picked AS MATERIALIZED (
    SELECT id AS picked_id, available_at AS was_available_at FROM task
     WHERE id = ANY($2::text[]) AND ${QUEUED} AND available_at <= now() FOR UPDATE)
  UPDATE task t SET instance_id = $1, lease_expires_at = now() + $3::int * interval '1 millisecond',
         generation = t.generation + 1, available_at = NULL, queue_hold = NULL, status_message = ${RUNNING_MESSAGE},
         last_updated_at = ${NOW_MS}
    FROM picked WHERE t.id = picked.picked_id
  RETURNING ${SNAPSHOT_COLUMNS}, t.checkpoint, t.principal,
            greatest(0, extract(epoch FROM (now() - picked.was_available_at)) * 1000)::float8 AS waited_ms,
            pg_current_xact_id()::text AS xact`,
};

/**
 * What the limits of the tools among the picked tasks have in use, under the claim lock: their runs (leased,
 * lease not lapsed: a dead instance's runs stop counting the moment their lease lapses) by limit key, with
 * the earliest lapse; and, for tools with a rate ($2 tools, $3 intervals), the starts inside the interval,
 * with the first of them (the starts before it are deleted here: nothing counts them any more).
 */
const LIMITS_IN_USE: PreparedStatement = {
  name: 'mcp_task_limits_in_use',
  text: `WITH rates AS (SELECT * FROM unnest($2::text[], $3::int[]) AS r(tool, ms)),
  gone AS (DELETE FROM tool_run_start s USING rates
            WHERE s.tool_name = rates.tool AND s.started_at <= now() - rates.ms * interval '1 millisecond')
  SELECT 'run' AS kind, tool_name, limit_key, count(*)::int AS n, min(lease_expires_at) AS at FROM task
   WHERE status = 'working' AND instance_id IS NOT NULL AND limit_key IS NOT NULL
     AND tool_name = ANY($1::text[]) AND lease_expires_at > now() AND id <> ALL($4::text[])
   GROUP BY tool_name, limit_key
  UNION ALL
  SELECT 'start', s.tool_name, NULL, count(*)::int, min(s.started_at) + min(rates.ms) * interval '1 millisecond'
    FROM tool_run_start s JOIN rates ON s.tool_name = rates.tool
   WHERE s.started_at > now() - rates.ms * interval '1 millisecond'
   GROUP BY s.tool_name`,
};

/**
 * Holds the queued tasks of tool $1 (those of limit key $2 only, when given) that a limit keeps from running,
 * until $3 (when the limit's earliest run lease lapses, or its rate interval frees a start): they leave the
 * claimable part of the queue, so the next claims do not read them again; a run of the tool ending anywhere
 * lets them go at once (releaseLimitHolds). The statusMessage says which limit; a row whose message changes
 * is returned, to be published.
 */
const HOLD_LIMITED: PreparedStatement = {
  name: 'mcp_task_hold_limited',
  text: `WITH held AS (
    SELECT id AS held_id, status_message AS was FROM task
     WHERE tool_name = $1 AND limit_key IS NOT NULL AND ($2::text IS NULL OR limit_key = $2) AND ${QUEUED}
       AND available_at <= now() FOR UPDATE)
  UPDATE task t SET queue_hold = 'limit', available_at = greatest($3::timestamptz, now() + interval '1 millisecond'), status_message = $4,
         last_updated_at = CASE WHEN held.was IS DISTINCT FROM $4 THEN ${NOW_MS} ELSE t.last_updated_at END
    FROM held WHERE t.id = held.held_id
  RETURNING ${SNAPSHOT_COLUMNS}, held.was IS DISTINCT FROM $4 AS changed`,
};

/** Holds picked tasks of a paused tool (created as the pause committed): no available_at until resumed. */
const HOLD_PAUSED: PreparedStatement = {
  name: 'mcp_task_hold_paused',
  text: `UPDATE task t SET queue_hold = 'paused', available_at = NULL, status_message = $2,
         last_updated_at = ${NOW_MS}
   WHERE t.id = ANY($1::text[]) AND t.status = 'working' AND t.instance_id IS NULL
  RETURNING ${SNAPSHOT_COLUMNS}`,
};

/** Records run starts of tools that declare a rate (one row per start). */
const RECORD_STARTS: PreparedStatement = {
  name: 'mcp_task_record_starts',
  text: `INSERT INTO tool_run_start (tool_name) SELECT unnest($1::text[])`,
};

/** A limit's declaration, as the claim applies it (the tool's LimitsPolicy). */
export type ClaimLimits = (tool: string) => LimitsPolicy | undefined;

/** The most pick rounds one claim makes when limits hold what it picked (each round holds what it skips). */
const MAX_PICK_ROUNDS = 8;

/**
 * The queue every instance claims from (TaskClaimer): the claim and the queue's depth. Queued rows are
 * made by creation (TaskCreationRepository, no instance), requeue (TaskWorkerRepository: retries and
 * hand-overs), a resume whose instance had no free slot (TasksRepository.mergeInputResponses) and the
 * janitor's rescue; each announces itself on TASK_QUEUE_CHANNEL at commit.
 */
@Injectable()
export class TaskQueueRepository {
  constructor(
    private readonly dataSource: DataSource,
    private readonly transactions: TaskTransactions,
    private readonly publisher: TaskChangePublisher,
  ) {}

  /**
   * Claims up to `n` claimable tasks for `instanceId`, fairly (CLAIM_FAIRLY) and within the limits the tools
   * declare (`limits`) and their queues' pauses: each is leased for `leaseMs`, its generation bumped,
   * available_at cleared, and the change published (in session order, the order every task transaction
   * publishes in). Claims on every instance take turns on the claim lock, so the running counts each one
   * reads include every earlier claim. A task a limit or a pause keeps from running is held instead (its
   * statusMessage says why) and another is picked in its place. A COMMIT whose answer was lost is looked up
   * (knownTx), so a claim that landed is run rather than left for its lease to lapse.
   */
  async claim(
    instanceId: string,
    n: number,
    leaseMs: number,
    limits: ClaimLimits = () => undefined,
    ended: readonly string[] = [],
  ): Promise<ClaimedTask[]> {
    if (n <= 0) return [];
    const want = Math.floor(n);
    return this.transactions.knownTx(async (m) => {
      const claimed: ClaimedTask[] = [];
      // Tasks held (their statusMessage changed), published with the claimed ones in session order.
      const held: TaskSnapshot[] = [];
      const usage = new LimitUsage(limits, leaseMs, ended);
      // The lock goes with BEGIN in one round trip; the fair claim is its own (prepared) statement after it.
      // Its generic plan (index probes only) is kept: with plan_cache_mode auto, PostgreSQL judged its
      // estimate worse than a custom plan's and planned the statement again on every claim.
      await m.first(
        {
          name: 'mcp_task_claim_lock',
          text: `SET LOCAL plan_cache_mode = force_generic_plan; SELECT pg_advisory_xact_lock(${AdvisoryLockKey.TaskClaim})`,
        },
        [],
      );
      for (let round = 0; round < MAX_PICK_ROUNDS && claimed.length < want; round++) {
        const rows = await m.prepared<Row>(CLAIM_FAIRLY, [
          want - claimed.length,
          textArray(ended),
          instanceId,
          Math.floor(leaseMs),
        ]);
        claimed.push(
          ...this.claimedOf(
            m,
            rows.filter((r) => r.id !== null),
          ),
        );
        const gated = (rows[0]?.gated as GatedPick[] | null) ?? [];
        if (gated.length === 0) break;
        await usage.load(
          m,
          gated.filter((g) => !g.paused),
        );
        const admitted: string[] = [];
        const starts: string[] = [];
        const holds = new Map<string, Hold>();
        const paused: GatedPick[] = [];
        for (const g of gated) {
          const policy = g.limitKey === null ? undefined : limits(g.tool);
          if (g.paused) paused.push(g);
          else if (!policy)
            admitted.push(g.id); // a tool this instance knows no limits of
          else {
            const hold = usage.admit(g.tool, g.limitKey as string, policy);
            if (hold) holds.set(`${hold.tool}\u0000${hold.key ?? '\u0001all'}`, hold);
            else {
              admitted.push(g.id);
              if (policy.rate) starts.push(g.tool);
            }
          }
        }
        // Leased before the holds, which take every claimable task of the tool (or key) they hold.
        if (admitted.length > 0) {
          const rows = await m.prepared<Row>(CLAIM_PICKED, [instanceId, admitted, Math.floor(leaseMs)]);
          claimed.push(...this.claimedOf(m, rows));
        }
        if (starts.length > 0) await m.prepared(RECORD_STARTS, [starts]);
        for (const g of paused) {
          const rows = await m.prepared<Row>(HOLD_PAUSED, [[g.id], pausedMessage(g.tool)]);
          held.push(...rows.map(rowToSnapshot));
        }
        for (const hold of holds.values()) {
          const rows = await m.prepared<Row>(HOLD_LIMITED, [hold.tool, hold.key, hold.until, hold.message]);
          held.push(...rows.filter((x) => x.changed === true).map(rowToSnapshot));
          // Every claimer arms its timer for when the hold ends (a lapse is exact only if it is looked at).
          if (rows.length > 0) {
            await this.publisher.announceReleased(m, rows[0].id as string, rows.length, hold.until.getTime());
          }
        }
      }
      const changes = [
        ...claimed.map((c) => ({ task: c.task, waitedMs: c.waitedMs })),
        ...held.map((task) => ({ task, waitedMs: null })),
      ].sort((a, b) => bySession(a.task, b.task));
      for (const c of changes) {
        const audit =
          c.waitedMs === null
            ? undefined
            : {
                kind: 'task.attempt' as const,
                actor: 'worker' as const,
                detail: { start: 'claimed', waitedMs: Math.round(c.waitedMs) },
              };
        await this.publisher.publish(m, c.task, 'working', audit);
      }
      return claimed.sort((a, b) => bySession(a.task, b.task));
    });
  }

  /** Claimed tasks as the claim's rows return them (the transaction's id noted for a lost COMMIT). */
  private claimedOf(m: SqlTx, rows: Row[]): ClaimedTask[] {
    if (rows.length > 0) this.transactions.noteXact(m, rows[0].xact as string);
    return rows.map((r) => ({
      task: rowToSnapshot(r),
      checkpoint: r.checkpoint ?? null,
      principal: (r.principal as Record<string, unknown> | null) ?? null,
      waitedMs: toNumber(r.waited_ms),
    }));
  }

  /**
   * The queue's depth (all instances), with the database clock's view of "due". Tasks past their expiry are
   * not counted: the claim never starts them, and expiry ends them.
   */
  async depth(): Promise<QueueDepth> {
    const [r] = await this.dataSource.query<Row[]>(
      `SELECT count(*) FILTER (WHERE available_at <= now())::int AS ready,
              count(*) FILTER (WHERE available_at > now())::int AS delayed,
              (extract(epoch FROM (min(available_at) FILTER (WHERE available_at > now()) - now())) * 1000)::float8
                AS next_ms
         FROM task WHERE status = 'working' AND instance_id IS NULL AND available_at IS NOT NULL
          AND expires_at > now()`,
    );
    return {
      ready: toNumber(r.ready),
      delayed: toNumber(r.delayed),
      nextDelayedInMs: r.next_ms === null || r.next_ms === undefined ? null : toNumber(r.next_ms),
    };
  }
}

/** Why picked tasks of a tool wait, and until when they are looked at again. */
interface Hold {
  tool: string;
  /** The limit key the hold is for; null: every queued task of the tool. */
  key: string | null;
  until: Date;
  message: string;
}

/**
 * The runs and starts the limits of some tools have in use, read once per claim under the claim lock and
 * counted up as the claim admits tasks, so one claim never admits past a limit either.
 */
class LimitUsage {
  private readonly runs = new Map<string, number>();
  private readonly byKey = new Map<string, number>();
  private readonly starts = new Map<string, number>();
  private readonly firstLapse = new Map<string, Date>();
  private readonly keyLapse = new Map<string, Date>();
  private readonly nextStart = new Map<string, Date>();
  private readonly loaded = new Set<string>();

  constructor(
    private readonly limits: ClaimLimits,
    private readonly leaseMs: number,
    private readonly ended: readonly string[],
  ) {}

  /** Reads what is in use for the limited tools among `picked` not read yet in this claim. */
  async load(m: SqlTx, picked: readonly GatedPick[]): Promise<void> {
    const tools = [
      ...new Set(
        picked.filter((g) => g.limitKey !== null && this.limits(g.tool) !== undefined).map((g) => g.tool),
      ),
    ].filter((t) => !this.loaded.has(t));
    if (tools.length === 0) return;
    const rated = tools.filter((t) => this.limits(t)?.rate);
    const rows = await m.prepared<Row>(LIMITS_IN_USE, [
      tools,
      rated,
      rated.map((t) => this.limits(t)?.rate?.intervalMs ?? 1),
      this.ended,
    ]);
    for (const t of tools) this.loaded.add(t);
    for (const r of rows) {
      const tool = r.tool_name as string;
      const n = toNumber(r.n);
      const at = r.at as Date;
      if (r.kind === 'start') {
        this.starts.set(tool, n);
        this.nextStart.set(tool, at);
        continue;
      }
      const key = `${tool}\u0000${r.limit_key as string}`;
      this.runs.set(tool, (this.runs.get(tool) ?? 0) + n);
      this.byKey.set(key, n);
      const first = this.firstLapse.get(tool);
      if (!first || at < first) this.firstLapse.set(tool, at);
      this.keyLapse.set(key, at);
    }
  }

  /**
   * Admits one run of `tool` with limit key `key` (counting it) or says which limit holds it. A hold until a
   * lapse is looked at again then at the latest; a run of the tool ending anywhere lets it go sooner.
   */
  admit(tool: string, key: string, policy: LimitsPolicy): Hold | undefined {
    const k = `${tool}\u0000${key}`;
    const running = this.runs.get(tool) ?? 0;
    // Held behind runs admitted by this claim alone: those leases lapse a lease from now at the earliest.
    const soon = (): Date => new Date(Date.now() + this.leaseMs);
    if (policy.concurrency !== undefined && running >= policy.concurrency) {
      return {
        tool,
        key: null,
        until: this.firstLapse.get(tool) ?? soon(),
        message: `Queued: waiting for the limit of ${policy.concurrency} ${runsWord(policy.concurrency)} of ${tool} at once`,
      };
    }
    if (policy.perKey && (this.byKey.get(k) ?? 0) >= policy.perKey.concurrency) {
      const c = policy.perKey.concurrency;
      return {
        tool,
        key,
        until: this.keyLapse.get(k) ?? soon(),
        message: `Queued: waiting for the limit of ${c} ${runsWord(c)} of ${tool} at once per ${policy.perKey.argument}`,
      };
    }
    if (policy.rate && (this.starts.get(tool) ?? 0) >= policy.rate.starts) {
      return {
        tool,
        key: null,
        until: this.nextStart.get(tool) ?? soon(),
        message: `Queued: waiting for the limit of ${policy.rate.starts} ${startsWord(policy.rate.starts)} of ${tool} per ${policy.rate.intervalMs} ms`,
      };
    }
    this.runs.set(tool, running + 1);
    this.byKey.set(k, (this.byKey.get(k) ?? 0) + 1);
    if (policy.rate) {
      this.starts.set(tool, (this.starts.get(tool) ?? 0) + 1);
      if (!this.nextStart.has(tool)) this.nextStart.set(tool, new Date(Date.now() + policy.rate.intervalMs));
    }
    return undefined;
  }
}

function runsWord(n: number): string {
  return n === 1 ? 'run' : 'runs';
}

function startsWord(n: number): string {
  return n === 1 ? 'start' : 'starts';
}

/** Task ids as a PostgreSQL array literal (text[]), each quoted. */
function textArray(ids: readonly string[]): string {
  return `{${ids.map((id) => `"${id.replace(/["\\]/g, (c) => `\\${c}`)}"`).join(',')}}`;
}
