import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { AdvisoryLockKey } from '../../database/advisory-locks.js';
import type { SqlTx } from '../../database/sql-transaction.js';
import { pausedMessage, QUEUED_MESSAGE, TOOL_QUEUE_CHANNEL } from '../task-queue.js';
import type { TaskSnapshot } from '../task.types.js';
import { TaskChangePublisher } from './task-change-publisher.js';
import { bySession, NOW_MS, rowToSnapshot, SNAPSHOT_COLUMNS, toNumber, type Row } from './task-row.mapper.js';
import { TaskTransactions } from './task-transactions.js';

/** A task not ended and not past its expiry (expiry ends it; the claim never starts it). */
const LIVE = `status = 'working' AND expires_at > now()`;
/** Leased, and the lease has not lapsed: a run the limits count. */
const LEASE_HELD = `(instance_id IS NOT NULL AND lease_expires_at > now())`;

/** Why a queued task waits, as the queue's status and metrics report it. */
export type WaitReason = 'paused' | 'limit' | 'fair_share' | 'no_slot';

/** One tool's queue as `queue status` shows it. */
export interface ToolQueueCounts {
  tool: string;
  paused: boolean;
  /** Runs whose lease has not lapsed: what the tool's limits count. */
  running: number;
  /**
   * Tasks waiting to run, by why: held by a pause or a limit, claimable now ('fair_share' and 'no_slot' of
   * the metrics), delayed by a retry backoff, or `lapsed`: leased by an instance whose lease lapsed (it died
   * or lost the database), waiting for recovery to queue them again.
   */
  waiting: Record<'paused' | 'limit' | 'claimable' | 'delayed' | 'lapsed', number>;
}

/** The queue by tool and by fairness key, read in one snapshot. */
export interface QueueStatusRows {
  tools: ToolQueueCounts[];
  /** Per fairness key: tasks running and waiting (held or claimable), the keys with any. */
  keys: { key: string; running: number; waiting: number; claimable: number }[];
  /** The tools paused now, with who paused them and when. */
  paused: { tool: string; changedAt: Date; changedBy: string | null }[];
}

/** What the queue's gauges read (ToolQueueRepository.gauges). */
export interface QueueGauges {
  /** Queued tasks by tool and why they wait. */
  waiting: { tool: string; reason: WaitReason; n: number }[];
  /** Runs of tools that declare limits, leases not lapsed, by tool and limit key ('' without perKey). */
  running: { tool: string; key: string; n: number }[];
  /** Starts inside the rate interval, for each tool asked about. */
  started: { tool: string; n: number }[];
}

/** A pause or resume as it landed. */
export interface PauseChange {
  /** False when the tool already was in that state (nothing changed, nothing recorded). */
  changed: boolean;
  /** Queued tasks it held (pause) or let go (resume). */
  tasks: number;
}

/**
 * The SQL of sharing the queue besides the claim (TaskQueueRepository): pausing and resuming a tool's queue,
 * letting go the tasks a limit holds when a run of their tool ends, and the queue's status by tool and by
 * fairness key.
 */
@Injectable()
export class ToolQueueRepository {
  constructor(
    private readonly dataSource: DataSource,
    private readonly transactions: TaskTransactions,
    private readonly publisher: TaskChangePublisher,
  ) {}

  /** The tools whose queue is paused now. */
  async pausedTools(): Promise<string[]> {
    const rows = await this.dataSource.query<Row[]>(`SELECT tool_name FROM tool_queue WHERE paused`);
    return rows.map((r) => r.tool_name as string);
  }

  /**
   * Pauses (`paused` true) or resumes a tool's queue, for every instance. A pause takes the claim lock, so no
   * claim is between its reads and its writes: every queued task of the tool is held ('paused', no
   * available_at, a statusMessage saying so) and no claim after it starts one. A resume lets them go
   * (claimable now, announced with one notice); the claim re-applies the tool's limits. Both are recorded in
   * the audit trail by `record` in the same transaction, and announced on TOOL_QUEUE_CHANNEL at commit.
   */
  async setPaused(
    tool: string,
    paused: boolean,
    changedBy: string,
    record: (m: SqlTx, change: PauseChange) => Promise<void>,
  ): Promise<PauseChange> {
    return this.transactions.tx(async (m) => {
      await m.query(`SELECT pg_advisory_xact_lock(${AdvisoryLockKey.TaskClaim})`);
      const [was] = await m.query<Row>(`SELECT paused FROM tool_queue WHERE tool_name = $1 FOR UPDATE`, [
        tool,
      ]);
      if ((was?.paused === true) === paused) return { changed: false, tasks: 0 };
      await m.query(
        `INSERT INTO tool_queue (tool_name, paused, changed_at, changed_by) VALUES ($1, $2, now(), $3)
         ON CONFLICT (tool_name) DO UPDATE SET paused = $2, changed_at = now(), changed_by = $3`,
        [tool, paused, changedBy],
      );
      const rows = paused
        ? await m.query<Row>(
            `UPDATE task t SET queue_hold = 'paused', available_at = NULL, status_message = $2,
                    last_updated_at = ${NOW_MS}
              WHERE t.tool_name = $1 AND t.status = 'working' AND t.instance_id IS NULL
                AND t.queue_hold IS DISTINCT FROM 'paused'
             RETURNING ${SNAPSHOT_COLUMNS}`,
            [tool, pausedMessage(tool)],
          )
        : await m.query<Row>(
            `UPDATE task t SET queue_hold = NULL, available_at = now(), status_message = $2,
                    last_updated_at = ${NOW_MS}
              WHERE t.tool_name = $1 AND t.status = 'working' AND t.instance_id IS NULL
                AND t.queue_hold = 'paused'
             RETURNING ${SNAPSHOT_COLUMNS}`,
            [tool, QUEUED_MESSAGE],
          );
      const tasks: TaskSnapshot[] = rows.map(rowToSnapshot).sort(bySession);
      for (const task of tasks) await this.publisher.publish(m, task, 'working');
      if (!paused && tasks.length > 0) await this.publisher.announceReleased(m, tasks[0].id, tasks.length);
      m.notifyOnCommit(TOOL_QUEUE_CHANNEL, JSON.stringify({ tool, paused }));
      const change = { changed: true, tasks: tasks.length };
      await record(m, change);
      return change;
    });
  }

  /**
   * A run of `tool` ended (this instance wrote its outcome): the queued tasks its limits hold are looked at
   * again now rather than when the lease they waited behind would lapse (one notice wakes the claimers).
   * The claim holds again those that still cannot run.
   */
  async releaseLimitHolds(tool: string): Promise<number> {
    return this.transactions.tx(async (m) => {
      const rows = await m.query<Row>(
        `UPDATE task SET available_at = now()
          WHERE tool_name = $1 AND limit_key IS NOT NULL AND status = 'working' AND instance_id IS NULL
            AND queue_hold = 'limit' AND available_at > now()
         RETURNING id`,
        [tool],
      );
      if (rows.length > 0) await this.publisher.announceReleased(m, rows[0].id as string, rows.length);
      return rows.length;
    });
  }

  /**
   * What the queue's gauges read at scrape time, in one snapshot: queued tasks by tool and why they wait; the
   * runs the limits count (leased, lease not lapsed) by tool and limit key; and, for each tool in `rates`,
   * its starts inside its rate interval. A claimable task waits for its `fair_share` when its fairness key
   * already runs more tasks than the key with work waiting that runs the fewest (the next free slot goes to
   * that one), else for `no_slot`. Tasks delayed by a retry backoff are not here
   * (mcp_task_queue_depth{state="delayed"} counts them), nor are tasks past their expiry.
   */
  async gauges(rates: readonly { tool: string; intervalMs: number }[] = []): Promise<QueueGauges> {
    return this.transactions.tx(async (m) => {
      // One snapshot for the three reads: a run that starts between them is counted once or not at all.
      await m.query(`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`);
      const waiting = await m.query<Row>(
        `WITH q AS (
           SELECT tool_name, fairness_key, queue_hold, available_at <= now() AS ready
             FROM task WHERE ${LIVE} AND instance_id IS NULL),
         running AS (
           SELECT fairness_key, count(*) AS n FROM task
            WHERE status = 'working' AND instance_id IS NOT NULL GROUP BY fairness_key),
         fewest AS (
           SELECT min(coalesce(r.n, 0)) AS n
             FROM (SELECT DISTINCT fairness_key FROM q WHERE ready AND queue_hold IS DISTINCT FROM 'paused') k
             LEFT JOIN running r USING (fairness_key))
         SELECT q.tool_name,
                CASE WHEN q.queue_hold = 'paused' THEN 'paused'
                     WHEN NOT q.ready AND q.queue_hold = 'limit' THEN 'limit'
                     WHEN coalesce(r.n, 0) > (SELECT n FROM fewest) THEN 'fair_share'
                     ELSE 'no_slot' END AS reason,
                count(*)::int AS n
           FROM q LEFT JOIN running r USING (fairness_key)
          WHERE q.queue_hold IS NOT NULL OR q.ready
          GROUP BY 1, 2`,
      );
      const limited = await m.query<Row>(
        `SELECT tool_name, limit_key, count(*)::int AS n FROM task
          WHERE status = 'working' AND limit_key IS NOT NULL AND ${LEASE_HELD}
          GROUP BY tool_name, limit_key`,
      );
      const started =
        rates.length === 0
          ? []
          : await m.query<Row>(
              `SELECT r.tool AS tool_name,
                      (SELECT count(*)::int FROM tool_run_start s
                        WHERE s.tool_name = r.tool AND s.started_at > now() - r.ms * interval '1 millisecond') AS n
                 FROM unnest($1::text[], $2::int[]) AS r(tool, ms)`,
              [rates.map((r) => r.tool), rates.map((r) => Math.floor(r.intervalMs))],
            );
      return {
        waiting: waiting.map((r) => ({
          tool: r.tool_name as string,
          reason: r.reason as WaitReason,
          n: toNumber(r.n),
        })),
        running: limited.map((r) => ({
          tool: r.tool_name as string,
          key: r.limit_key as string,
          n: toNumber(r.n),
        })),
        started: started.map((r) => ({ tool: r.tool_name as string, n: toNumber(r.n) })),
      };
    });
  }

  /**
   * The queue's status: per tool, running and waiting tasks by why they wait; per fairness key, running and
   * waiting. It counts as the claim does: a run is one whose lease has not lapsed (a lapsed one waits for
   * recovery), and a task past its expiry is neither running nor waiting (expiry ends it, the claim never
   * starts it). Reads the live rows only (task_queue_fair_idx, task_running_fair_idx).
   */
  async status(): Promise<QueueStatusRows> {
    const [toolRows, keyRows, pausedRows] = await Promise.all([
      this.dataSource.query<Row[]>(
        `SELECT tool_name,
                count(*) FILTER (WHERE ${LEASE_HELD})::int AS running,
                count(*) FILTER (WHERE instance_id IS NOT NULL AND NOT ${LEASE_HELD})::int AS lapsed,
                count(*) FILTER (WHERE instance_id IS NULL AND queue_hold = 'paused')::int AS paused,
                count(*) FILTER (WHERE instance_id IS NULL AND queue_hold = 'limit' AND available_at > now())::int AS limited,
                count(*) FILTER (WHERE instance_id IS NULL AND queue_hold IS DISTINCT FROM 'paused'
                                   AND available_at <= now())::int AS claimable,
                count(*) FILTER (WHERE instance_id IS NULL AND queue_hold IS NULL AND available_at > now())::int AS delayed
           FROM task WHERE ${LIVE} GROUP BY tool_name`,
      ),
      this.dataSource.query<Row[]>(
        `SELECT fairness_key,
                count(*) FILTER (WHERE ${LEASE_HELD})::int AS running,
                count(*) FILTER (WHERE NOT ${LEASE_HELD})::int AS waiting,
                count(*) FILTER (WHERE instance_id IS NULL AND available_at <= now())::int AS claimable
           FROM task WHERE ${LIVE} GROUP BY fairness_key ORDER BY fairness_key`,
      ),
      this.dataSource.query<Row[]>(
        `SELECT tool_name, changed_at, changed_by FROM tool_queue WHERE paused ORDER BY tool_name`,
      ),
    ]);
    const paused = new Set(pausedRows.map((r) => r.tool_name as string));
    const tools = new Map<string, ToolQueueCounts>();
    for (const r of toolRows) {
      const tool = r.tool_name as string;
      tools.set(tool, {
        tool,
        paused: paused.has(tool),
        running: toNumber(r.running),
        waiting: {
          paused: toNumber(r.paused),
          limit: toNumber(r.limited),
          claimable: toNumber(r.claimable),
          delayed: toNumber(r.delayed),
          lapsed: toNumber(r.lapsed),
        },
      });
    }
    for (const tool of paused) {
      if (!tools.has(tool)) {
        tools.set(tool, {
          tool,
          paused: true,
          running: 0,
          waiting: { paused: 0, limit: 0, claimable: 0, delayed: 0, lapsed: 0 },
        });
      }
    }
    return {
      tools: [...tools.values()].sort((a, b) => a.tool.localeCompare(b.tool)),
      keys: keyRows.map((r) => ({
        key: r.fairness_key as string,
        running: toNumber(r.running),
        waiting: toNumber(r.waiting),
        claimable: toNumber(r.claimable),
      })),
      paused: pausedRows.map((r) => ({
        tool: r.tool_name as string,
        changedAt: r.changed_at as Date,
        changedBy: (r.changed_by as string | null) ?? null,
      })),
    };
  }
}
