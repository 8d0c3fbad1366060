import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Sharing the task queue (docs/tool-authoring.md, "Sharing the queue"; docs/operations.md, "The queue"):
 *
 * - task.fairness_key: whose share a task runs on (the owner's principal id, a tenant claim, or '' with fair
 *   sharing off). Live rows written before it get their owner, which is what the default setting gives.
 * - task.limit_key: set on tasks of tools that declare limits only: the per-key value of their arguments, or ''
 *   when the tool has no per-key limit. NULL means "not limited", so the two limit indexes below hold only
 *   those tasks and the common path never writes to them.
 * - task.queue_hold: why a queued task is not claimable now: 'paused' (its tool's queue is paused;
 *   available_at NULL) or 'limit' (a limit its tool declares; available_at is when it is looked at again).
 * - tool_queue: one row per tool an operator paused or resumed.
 * - tool_run_start: the starts of tools that declare a rate, kept for the length of their interval.
 *
 * Indexes, by the query that needs them:
 * - task_queue_fair_idx (fairness_key, available_at) over queued rows replaces task_claim_idx: the claim steps
 *   from one fairness key to the next and reads each key's oldest claimable rows, so it never reads the rest
 *   of a key's queue;
 * - task_running_fair_idx (fairness_key) over running rows: how many each key has running, for the claim;
 * - task_limited_running_idx and task_limited_queued_idx (tool_name, limit_key): the runs a limit counts, and
 *   the queued tasks a limit holds and lets go.
 * Plain CREATE INDEX, like every migration here (they run in one transaction): writes to task wait while they
 * are built, about a second per million rows on a small machine.
 */
export class QueueSharing1765400000000 implements MigrationInterface {
  name = 'QueueSharing1765400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "task" ADD "fairness_key" text NOT NULL DEFAULT ''`);
    await q.query(`ALTER TABLE "task" ADD "limit_key" text`);
    await q.query(`ALTER TABLE "task" ADD "queue_hold" text`);
    await q.query(
      `ALTER TABLE "task" ADD CONSTRAINT "task_queue_hold_check" CHECK ("queue_hold" IN ('paused', 'limit'))`,
    );
    await q.query(
      `UPDATE "task" SET "fairness_key" = "owner_id" WHERE "status" IN ('working', 'input_required')`,
    );
    await q.query(`DROP INDEX "task_claim_idx"`);
    await q.query(
      `CREATE INDEX "task_queue_fair_idx" ON "task" ("fairness_key", "available_at")
        WHERE status = 'working' AND instance_id IS NULL`,
    );
    await q.query(
      `CREATE INDEX "task_running_fair_idx" ON "task" ("fairness_key")
        WHERE status = 'working' AND instance_id IS NOT NULL`,
    );
    await q.query(
      `CREATE INDEX "task_limited_running_idx" ON "task" ("tool_name", "limit_key")
        WHERE status = 'working' AND instance_id IS NOT NULL AND limit_key IS NOT NULL`,
    );
    await q.query(
      `CREATE INDEX "task_limited_queued_idx" ON "task" ("tool_name", "limit_key")
        WHERE status = 'working' AND instance_id IS NULL AND limit_key IS NOT NULL`,
    );
    await q.query(
      `CREATE TABLE "tool_queue" (
         "tool_name" text PRIMARY KEY,
         "paused" boolean NOT NULL,
         "changed_at" timestamptz NOT NULL DEFAULT now(),
         "changed_by" text
       )`,
    );
    await q.query(
      `CREATE TABLE "tool_run_start" (
         "id" bigserial PRIMARY KEY,
         "tool_name" text NOT NULL,
         "started_at" timestamptz NOT NULL DEFAULT now()
       )`,
    );
    await q.query(`CREATE INDEX "tool_run_start_tool_idx" ON "tool_run_start" ("tool_name", "started_at")`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "tool_run_start"`);
    await q.query(`DROP TABLE "tool_queue"`);
    await q.query(`DROP INDEX "task_limited_queued_idx"`);
    await q.query(`DROP INDEX "task_limited_running_idx"`);
    await q.query(`DROP INDEX "task_running_fair_idx"`);
    await q.query(`DROP INDEX "task_queue_fair_idx"`);
    await q.query(
      `CREATE INDEX "task_claim_idx" ON "task" ("available_at") WHERE status = 'working' AND instance_id IS NULL`,
    );
    await q.query(`ALTER TABLE "task" DROP CONSTRAINT "task_queue_hold_check"`);
    await q.query(`ALTER TABLE "task" DROP COLUMN "queue_hold"`);
    await q.query(`ALTER TABLE "task" DROP COLUMN "limit_key"`);
    await q.query(`ALTER TABLE "task" DROP COLUMN "fairness_key"`);
  }
}
