import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { PreparedStatement } from '../../database/prepared-query.js';
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

/**
 * The claim of queued work (working, no instance, available_at reached, ttl not run out): one statement that
 * takes up to `n` rows in available_at order under FOR UPDATE SKIP LOCKED (task_claim_idx), so concurrent
 * claimers on any number of instances never take the same row and never wait for one another's rows. A row
 * past created + ttl is left for lazy expiry and the janitor, which fail it as expired.
 */
const CLAIM: PreparedStatement = {
  name: 'mcp_task_claim',
  text: `WITH picked AS MATERIALIZED (
    SELECT id AS picked_id, available_at AS was_available_at FROM task
     WHERE status = 'working' AND instance_id IS NULL AND available_at <= now() AND expires_at > now()
     ORDER BY available_at LIMIT $2 FOR UPDATE SKIP LOCKED)
  UPDATE task t SET instance_id = $1, lease_expires_at = now() + $3::int * interval '1 millisecond',
         generation = t.generation + 1, available_at = NULL, status_message = ${RUNNING_MESSAGE},
         last_updated_at = ${NOW_MS}
    FROM picked WHERE t.id = picked.picked_id
  RETURNING ${SNAPSHOT_COLUMNS}, t.checkpoint, t.principal,
            greatest(0, extract(epoch FROM (now() - picked.was_available_at)) * 1000)::float8 AS waited_ms,
            pg_current_xact_id()::text AS xact`,
};

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
   * Claims up to `n` claimable tasks for `instanceId`, oldest available_at first: each is leased for
   * `leaseMs`, its generation bumped, available_at cleared, and the change published (in session order, the
   * order every task transaction publishes in). A COMMIT whose answer was lost is looked up (knownTx), so a
   * claim that landed is run rather than left for its lease to lapse.
   */
  async claim(instanceId: string, n: number, leaseMs: number): Promise<ClaimedTask[]> {
    if (n <= 0) return [];
    return this.transactions.knownTx(async (m) => {
      // Sent with BEGIN in one round trip (first): a claim is two round trips with its COMMIT.
      const rows = await m.first<Row>(CLAIM, [instanceId, Math.floor(n), Math.floor(leaseMs)]);
      if (rows.length === 0) return [];
      this.transactions.noteXact(m, rows[0].xact as string);
      const claimed = rows.map((r) => ({
        task: rowToSnapshot(r),
        checkpoint: r.checkpoint ?? null,
        principal: (r.principal as Record<string, unknown> | null) ?? null,
        waitedMs: toNumber(r.waited_ms),
      }));
      claimed.sort((a, b) => bySession(a.task, b.task));
      for (const c of claimed) {
        await this.publisher.publish(m, c.task, 'working', {
          kind: 'task.attempt',
          actor: 'worker',
          detail: { start: 'claimed', waitedMs: Math.round(c.waitedMs) },
        });
      }
      return claimed;
    });
  }

  /** The queue's depth (all instances), read on task_claim_idx, with the database clock's view of "due". */
  async depth(): Promise<QueueDepth> {
    const [r] = await this.dataSource.query<Row[]>(
      `SELECT count(*) FILTER (WHERE available_at <= now())::int AS ready,
              count(*) FILTER (WHERE available_at > now())::int AS delayed,
              (extract(epoch FROM (min(available_at) FILTER (WHERE available_at > now()) - now())) * 1000)::float8
                AS next_ms
         FROM task WHERE status = 'working' AND instance_id IS NULL AND available_at IS NOT NULL`,
    );
    return {
      ready: toNumber(r.ready),
      delayed: toNumber(r.delayed),
      nextDelayedInMs: r.next_ms === null || r.next_ms === undefined ? null : toNumber(r.next_ms),
    };
  }
}
