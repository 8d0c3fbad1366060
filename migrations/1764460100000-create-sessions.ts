import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Handshake-era sessions, their resumable SSE event log, and parked client responses. */
export class CreateSessions1764460100000 implements MigrationInterface {
  name = 'CreateSessions1764460100000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE "mcp_session" (
        "id" text NOT NULL,
        "principal_id" text NOT NULL,
        "protocol_version" text NOT NULL,
        "client_capabilities" jsonb NOT NULL DEFAULT '{}',
        "client_info" jsonb,
        "log_level" text,
        "resource_subscriptions" jsonb NOT NULL DEFAULT '[]',
        "created_at" TIMESTAMP WITH TIME ZONE NOT NULL,
        "last_seen_at" TIMESTAMP WITH TIME ZONE NOT NULL,
        "ended_at" TIMESTAMP WITH TIME ZONE,
        CONSTRAINT "PK_mcp_session" PRIMARY KEY ("id")
      )`);
    await q.query(`CREATE INDEX "mcp_session_last_seen_idx" ON "mcp_session" ("last_seen_at")`);
    await q.query(`
      CREATE TABLE "mcp_sse_event" (
        "seq" BIGSERIAL NOT NULL,
        "session_id" text NOT NULL,
        "stream_id" text NOT NULL,
        "payload" jsonb,
        "final" boolean NOT NULL DEFAULT false,
        "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        CONSTRAINT "PK_mcp_sse_event" PRIMARY KEY ("seq")
      )`);
    await q.query(
      `CREATE INDEX "mcp_sse_event_stream_idx" ON "mcp_sse_event" ("session_id", "stream_id", "seq")`,
    );
    await q.query(`CREATE INDEX "mcp_sse_event_created_idx" ON "mcp_sse_event" ("created_at")`);
    await q.query(`
      CREATE TABLE "mcp_client_response" (
        "session_id" text NOT NULL,
        "request_id" text NOT NULL,
        "payload" jsonb NOT NULL,
        "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        CONSTRAINT "PK_mcp_client_response" PRIMARY KEY ("session_id", "request_id")
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "mcp_client_response"`);
    await q.query(`DROP INDEX "mcp_sse_event_created_idx"`);
    await q.query(`DROP INDEX "mcp_sse_event_stream_idx"`);
    await q.query(`DROP TABLE "mcp_sse_event"`);
    await q.query(`DROP INDEX "mcp_session_last_seen_idx"`);
    await q.query(`DROP TABLE "mcp_session"`);
  }
}
