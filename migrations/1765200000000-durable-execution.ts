import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Durable execution (issue 22): the columns a task needs so that its work, not only its record, survives
 * deploys, dead instances and failing attempts.
 *
 * - `attempt`: the run the task is on (1 for the first run; a retry, a hand-over at drain or a rescue starts
 *   the next). `failed_attempts`: the runs that failed (errors, lost workers), the retry budget's measure;
 *   hand-overs do not count. `max_attempts` and `resumable` are copied from the tool's declaration at
 *   creation, so the janitor can decide a rescue in SQL without knowing the tools.
 * - `checkpoint`: the last progress state the handler saved, written under the run's fence.
 * - `last_error`: the error of the last failed run, named when the attempts are exhausted.
 * - `available_at`: set while the task is queued (working, no instance): the earliest time a worker may claim
 *   it (now, or when a retry's backoff ends). task_claim_idx serves the claim (FOR UPDATE SKIP LOCKED).
 * - `principal`: the owner's principal as the creating request saw it (id, provider, subject, scopes,
 *   groups), so a run claimed on another instance calls the tool as the same caller.
 * - `idempotency_key` / `request_hash`: an Idempotency-Key and the hash of the tool and arguments it was used
 *   with; unique per owner while the task exists.
 * - `redriven_from`: the task a `tasks retry` created this one from.
 */
export class DurableExecution1765200000000 implements MigrationInterface {
  name = 'DurableExecution1765200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "task"
      ADD "attempt" integer NOT NULL DEFAULT 1,
      ADD "failed_attempts" integer NOT NULL DEFAULT 0,
      ADD "max_attempts" integer NOT NULL DEFAULT 1,
      ADD "resumable" boolean NOT NULL DEFAULT false,
      ADD "checkpoint" jsonb,
      ADD "last_error" jsonb,
      ADD "available_at" TIMESTAMP WITH TIME ZONE,
      ADD "principal" jsonb,
      ADD "idempotency_key" text,
      ADD "request_hash" text,
      ADD "redriven_from" text`);
    await q.query(
      `CREATE INDEX "task_claim_idx" ON "task" ("available_at") WHERE status = 'working' AND instance_id IS NULL`,
    );
    await q.query(
      `CREATE UNIQUE INDEX "task_owner_idempotency_idx" ON "task" ("owner_id", "idempotency_key")
       WHERE idempotency_key IS NOT NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "task_owner_idempotency_idx"`);
    await q.query(`DROP INDEX "task_claim_idx"`);
    await q.query(`ALTER TABLE "task"
      DROP COLUMN "redriven_from", DROP COLUMN "request_hash", DROP COLUMN "idempotency_key",
      DROP COLUMN "principal", DROP COLUMN "available_at", DROP COLUMN "last_error", DROP COLUMN "checkpoint",
      DROP COLUMN "resumable", DROP COLUMN "max_attempts", DROP COLUMN "failed_attempts", DROP COLUMN "attempt"`);
  }
}
