import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { runPrepared, type PreparedStatement } from '../../database/prepared-query.js';
import { TaskChangePublisher } from './task-change-publisher.js';
import { QUEUED_MESSAGE } from '../task-queue.js';
import { bySession, NOW_MS, rowToSnapshot, SNAPSHOT_COLUMNS, type Row } from './task-row.mapper.js';
import { TaskTransactions } from './task-transactions.js';
import type { TaskSnapshot } from '../task.types.js';

/** A lease a write of this instance may have taken: the task, at the generation that write leased it at. */
export interface LeaseFence {
  taskId: string;
  generation: number;
}

/** A task found still leased here at its fence and kept to run here: what its run starts from. */
export interface KeptLease {
  task: TaskSnapshot;
  checkpoint: unknown;
  principal: Record<string, unknown> | null;
}

/** What settle found and did. */
export interface SettledLeases {
  /** Leased here at their fence, lease renewed: to be started now. */
  kept: KeptLease[];
  /** Leased here at their fence, given back to the queue. */
  released: TaskSnapshot[];
  /** Ids with no row at all (a creation that did not land, or has not committed yet). */
  absent: Set<string>;
}

const XACT_STATUS: PreparedStatement = {
  name: 'mcp_unresolved_xact_status',
  text: `SELECT pg_xact_status($1::xid8) AS status`,
};

/**
 * The rows a write of this instance leased to it when that write's COMMIT answer was lost (a claim, a
 * creation placed here), found and settled once PostgreSQL answers again (UnresolvedLeases). A row is this
 * write's lease exactly when it is still leased to this instance at the generation the write gave it: every
 * change of hands bumps the generation, so no other write can leave a row there (for a claim, once its
 * transaction is known to have committed; a creation's id is minted by it).
 */
@Injectable()
export class UnresolvedLeasesRepository {
  constructor(
    private readonly dataSource: DataSource,
    private readonly transactions: TaskTransactions,
    private readonly publisher: TaskChangePublisher,
  ) {}

  /** pg_xact_status of a transaction id: 'committed', 'aborted', 'in progress' or null (too old to tell). */
  async xactStatus(xact: string): Promise<string | null> {
    const [row] = await runPrepared<Row>(this.dataSource, XACT_STATUS, [xact]);
    return (row?.status as string | null | undefined) ?? null;
  }

  /**
   * Locks the rows among `fences` still leased to `instanceId` at their fenced generation (working, within
   * their ttl) and settles each: those `keep` accepts get a fresh lease (now() + leaseMs) and are returned to
   * be started; the others go back to the queue as they were before the write (no instance, claimable now,
   * the same attempt and no failure counted), published and announced on the queue channel at commit.
   * Idempotent: a settle whose own COMMIT answer is lost is simply run again (a renewed row is still at its
   * fence; a released one is not).
   */
  async settle(
    instanceId: string,
    fences: readonly LeaseFence[],
    leaseMs: number,
    keep: (task: TaskSnapshot) => boolean,
  ): Promise<SettledLeases> {
    if (fences.length === 0) return { kept: [], released: [], absent: new Set() };
    const ids = fences.map((f) => f.taskId);
    return this.transactions.tx(async (m) => {
      const held = await m.query<Row>(
        `SELECT ${SNAPSHOT_COLUMNS}, checkpoint, principal FROM task
          WHERE (id, generation) IN (SELECT * FROM unnest($2::text[], $3::bigint[]))
            AND instance_id = $1 AND status = 'working' AND expires_at > now()
          ORDER BY id
          FOR UPDATE`,
        [instanceId, ids, fences.map((f) => f.generation)],
      );
      const heldIds = new Set(held.map((r) => r.id as string));
      const missing = ids.filter((id) => !heldIds.has(id));
      const absent = new Set(missing);
      if (missing.length > 0) {
        const present = await m.query<Row>(`SELECT id FROM task WHERE id = ANY($1::text[])`, [missing]);
        for (const r of present) absent.delete(r.id as string);
      }
      const kept: KeptLease[] = [];
      const releasing: string[] = [];
      for (const r of held) {
        const task = rowToSnapshot(r);
        if (keep(task)) {
          kept.push({
            task,
            checkpoint: r.checkpoint ?? null,
            principal: (r.principal as Record<string, unknown> | null) ?? null,
          });
        } else releasing.push(task.id);
      }
      if (kept.length > 0) {
        const renewed = await m.query<Row>(
          `UPDATE task SET lease_expires_at = now() + $2::int * interval '1 millisecond'
            WHERE id = ANY($1::text[]) RETURNING ${SNAPSHOT_COLUMNS}`,
          [kept.map((k) => k.task.id), Math.floor(leaseMs)],
        );
        const byId = new Map(renewed.map((r) => [r.id as string, rowToSnapshot(r)]));
        for (const k of kept) k.task = byId.get(k.task.id) ?? k.task;
      }
      const released: TaskSnapshot[] = [];
      if (releasing.length > 0) {
        const rows = await m.query<Row>(
          `UPDATE task SET instance_id = NULL, lease_expires_at = NULL, generation = generation + 1,
                  available_at = now(), status_message = $2, last_updated_at = ${NOW_MS}
            WHERE id = ANY($1::text[]) RETURNING ${SNAPSHOT_COLUMNS}`,
          [releasing, QUEUED_MESSAGE],
        );
        released.push(...rows.map(rowToSnapshot).sort(bySession));
        for (const task of released) {
          await this.publisher.publish(m, task, 'working', {
            kind: 'task.handed_over',
            actor: 'worker',
            detail: { notStarted: true, attempt: task.attempt },
          });
          await this.publisher.announceQueued(m, task);
        }
      }
      return { kept, released, absent };
    });
  }
}
