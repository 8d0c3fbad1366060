import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Indexes for the /admin console's task reads (issue 23), which list tasks across every owner newest first
 * (ORDER BY created_at DESC, id DESC, keyset pagination) under one optional filter or a few. Measured with
 * bench/console.mjs on 1M task rows with 10,000 live: without them the unfiltered list, the status, tool and
 * instance filters and the age windows each sorted a scan of the whole table (150-300 ms, growing with it).
 *
 * - task_created_idx (created_at, id): the unfiltered list, age windows, and filters on common values (a busy
 *   tool, the completed status, the live statuses, whose rows are the newest), read backwards until the page
 *   is full;
 * - task_tool_created_idx (tool_name, created_at, id): a tool with few tasks, which the previous index would
 *   only find after reading most of the table;
 * - task_failed_created_idx (status, created_at, id) WHERE status IN ('failed', 'cancelled'): the two rare
 *   final statuses; partial, so a task enters it once, in the update that fails or cancels it, and the
 *   common path (created, run, completed) never writes to it;
 * - task_instance_created_idx (instance_id, created_at, id) WHERE instance_id IS NOT NULL: the instance filter
 *   and the leases each instance holds; only live tasks on an instance carry one (a few thousand rows);
 * - task_redriven_from_idx (redriven_from) WHERE redriven_from IS NOT NULL: a task page's "redriven as".
 *
 * Every task row version writes the first two, so they are the only ones the hot path pays for. The owner
 * filter uses task_owner_created_idx, status counts task_status_lease_idx (index-only). Plain CREATE INDEX
 * (migrations run in one transaction, which CONCURRENTLY cannot): writes to task wait while they are built,
 * about a second per million rows on a small machine.
 */
export class ConsoleIndexes1765300000002 implements MigrationInterface {
  name = 'ConsoleIndexes1765300000002';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX "task_created_idx" ON "task" ("created_at", "id")`);
    await q.query(`CREATE INDEX "task_tool_created_idx" ON "task" ("tool_name", "created_at", "id")`);
    await q.query(
      `CREATE INDEX "task_failed_created_idx" ON "task" ("status", "created_at", "id")
        WHERE status IN ('failed', 'cancelled')`,
    );
    await q.query(
      `CREATE INDEX "task_instance_created_idx" ON "task" ("instance_id", "created_at", "id")
        WHERE instance_id IS NOT NULL`,
    );
    await q.query(
      `CREATE INDEX "task_redriven_from_idx" ON "task" ("redriven_from") WHERE redriven_from IS NOT NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "task_redriven_from_idx"`);
    await q.query(`DROP INDEX "task_instance_created_idx"`);
    await q.query(`DROP INDEX "task_failed_created_idx"`);
    await q.query(`DROP INDEX "task_tool_created_idx"`);
    await q.query(`DROP INDEX "task_created_idx"`);
  }
}
