import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The audit trail (issue 23): one append-only row per thing that happened to a task, a session, an API key,
 * or that an operator did, written in the same transaction as the change it records (or on its own for
 * events that change nothing, such as a refused scope). Rows are never updated; the janitor deletes those
 * older than AUDIT_RETENTION_DAYS in batches.
 *
 * - `id`: a bigint identity, so "everything after row N" is an index range (the SIEM export's cursor).
 * - `at`: clock_timestamp() when the row is written (not the transaction's start, which a batch shares).
 * - `kind`: what happened (`task.created`, `task.status`, `task.cancelled`, ... ; src/audit/audit.types.ts).
 * - `actor`: who caused it (`owner`, `operator`, `janitor`, `worker`, `system`); `principal`: that caller's
 *   principal id (the operator's for operator actions), NULL for the system.
 * - `task_id`, `session_id`, `tool`, `era`, `status`, `previous_status`, `attempt`: what it concerned.
 * - `instance_id`, `trace_id`, `request_id`: where and in which request it happened.
 * - `detail`: the rest (message, sizes and hashes of arguments and results, idempotency key, key name).
 *
 * Indexes, by the reader that needs them:
 * - audit_event_at_idx: retention (at < cutoff) and `audit list --since`;
 * - audit_event_task_idx: a task's timeline (console, `audit list --task`);
 * - audit_event_principal_idx and audit_event_tool_idx: `audit list --principal/--tool`.
 */
export class AuditTrail1765300000000 implements MigrationInterface {
  name = 'AuditTrail1765300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE "mcp_audit_event" (
      "id" bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
      "at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT clock_timestamp(),
      "kind" text NOT NULL,
      "actor" text NOT NULL,
      "principal" text,
      "task_id" text,
      "session_id" text,
      "tool" text,
      "era" text,
      "status" text,
      "previous_status" text,
      "attempt" integer,
      "instance_id" text,
      "trace_id" text,
      "request_id" text,
      "detail" jsonb,
      CONSTRAINT "PK_mcp_audit_event" PRIMARY KEY ("id"),
      CONSTRAINT "audit_event_actor_check" CHECK ("actor" IN ('owner', 'operator', 'janitor', 'worker', 'system'))
    )`);
    await q.query(`CREATE INDEX "audit_event_at_idx" ON "mcp_audit_event" ("at")`);
    await q.query(`CREATE INDEX "audit_event_task_idx" ON "mcp_audit_event" ("task_id", "id")`);
    await q.query(`CREATE INDEX "audit_event_principal_idx" ON "mcp_audit_event" ("principal", "id")`);
    await q.query(`CREATE INDEX "audit_event_tool_idx" ON "mcp_audit_event" ("tool", "id")`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "mcp_audit_event"`);
  }
}
