import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * task: the durable task registry (src/tasks). Indexes serve list pagination per owner, the live count per
 * owner, the janitor's lease and expiry sweeps.
 */
export class CreateTask1764460300000 implements MigrationInterface {
  name = 'CreateTask1764460300000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE "task" (
        "id" text NOT NULL,
        "owner_id" text NOT NULL,
        "session_id" text,
        "era" text NOT NULL,
        "tool_name" text NOT NULL,
        "status" text NOT NULL,
        "status_message" text,
        "created_at" TIMESTAMP WITH TIME ZONE NOT NULL,
        "last_updated_at" TIMESTAMP WITH TIME ZONE NOT NULL,
        "ttl_ms" integer NOT NULL,
        "expires_at" TIMESTAMP WITH TIME ZONE NOT NULL,
        "poll_interval_ms" integer NOT NULL,
        "request_params" jsonb NOT NULL,
        "result" jsonb,
        "error" jsonb,
        "input_requests" jsonb NOT NULL DEFAULT '{}',
        "input_responses" jsonb NOT NULL DEFAULT '{}',
        "handler_state" jsonb,
        "input_rounds" integer NOT NULL DEFAULT '0',
        "generation" bigint NOT NULL DEFAULT '1',
        "instance_id" uuid,
        "lease_expires_at" TIMESTAMP WITH TIME ZONE,
        CONSTRAINT "task_era_check" CHECK ("era" IN ('legacy', 'modern')),
        CONSTRAINT "task_status_check"
          CHECK ("status" IN ('working', 'input_required', 'completed', 'failed', 'cancelled')),
        CONSTRAINT "PK_task" PRIMARY KEY ("id")
      )`);
    await q.query(`CREATE INDEX "task_owner_created_idx" ON "task" ("owner_id", "created_at", "id")`);
    await q.query(`CREATE INDEX "task_owner_status_idx" ON "task" ("owner_id", "status")`);
    await q.query(`CREATE INDEX "task_status_lease_idx" ON "task" ("status", "lease_expires_at")`);
    await q.query(`CREATE INDEX "task_expires_idx" ON "task" ("expires_at")`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "task_expires_idx"`);
    await q.query(`DROP INDEX "task_status_lease_idx"`);
    await q.query(`DROP INDEX "task_owner_status_idx"`);
    await q.query(`DROP INDEX "task_owner_created_idx"`);
    await q.query(`DROP TABLE "task"`);
  }
}
