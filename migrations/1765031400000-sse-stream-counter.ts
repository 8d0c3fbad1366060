import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Per-stream SSE event numbering. Event seqs used to come from one global sequence at INSERT time, so an event
 * whose transaction committed after a later one was skipped by readers draining `seq > lastSeq`. From here on
 * each (session, stream) has a counter row, bumped with UPDATE … RETURNING in the appending transaction: the
 * row lock is held to commit, so a later event of the same stream cannot commit before an earlier one.
 * Existing events keep their seq (their ids `<stream>_<seq>` stay replayable); each counter starts at the
 * highest seq its stream already has.
 */
export class SseStreamCounter1765031400000 implements MigrationInterface {
  name = 'SseStreamCounter1765031400000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE "mcp_sse_stream" (
        "session_id" text NOT NULL,
        "stream_id" text NOT NULL,
        "last_seq" bigint NOT NULL,
        CONSTRAINT "PK_mcp_sse_stream" PRIMARY KEY ("session_id", "stream_id")
      )`);
    await q.query(`
      INSERT INTO "mcp_sse_stream" ("session_id", "stream_id", "last_seq")
      SELECT "session_id", "stream_id", max("seq") FROM "mcp_sse_event" GROUP BY "session_id", "stream_id"`);
    await q.query(`ALTER TABLE "mcp_sse_event" ALTER COLUMN "seq" DROP DEFAULT`);
    await q.query(`DROP SEQUENCE IF EXISTS "mcp_sse_event_seq_seq"`);
    await q.query(`ALTER TABLE "mcp_sse_event" DROP CONSTRAINT "PK_mcp_sse_event"`);
    // The new primary key is the stream index it replaces.
    await q.query(`DROP INDEX "mcp_sse_event_stream_idx"`);
    await q.query(
      `ALTER TABLE "mcp_sse_event" ADD CONSTRAINT "PK_mcp_sse_event" PRIMARY KEY ("session_id", "stream_id", "seq")`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    // Per-stream seqs repeat across streams; the global key needs fresh numbers (in the order events were
    // logged), which invalidates ids that clients hold. Acceptable for a rollback.
    await q.query(`ALTER TABLE "mcp_sse_event" DROP CONSTRAINT "PK_mcp_sse_event"`);
    await q.query(`CREATE SEQUENCE "mcp_sse_event_seq_seq" OWNED BY "mcp_sse_event"."seq"`);
    await q.query(`
      UPDATE "mcp_sse_event" e SET "seq" = r.n
      FROM (SELECT ctid, nextval('"mcp_sse_event_seq_seq"') AS n
            FROM (SELECT ctid FROM "mcp_sse_event" ORDER BY "created_at", "session_id", "stream_id", "seq") o) r
      WHERE e.ctid = r.ctid`);
    await q.query(
      `ALTER TABLE "mcp_sse_event" ALTER COLUMN "seq" SET DEFAULT nextval('"mcp_sse_event_seq_seq"')`,
    );
    await q.query(`ALTER TABLE "mcp_sse_event" ADD CONSTRAINT "PK_mcp_sse_event" PRIMARY KEY ("seq")`);
    await q.query(
      `CREATE INDEX "mcp_sse_event_stream_idx" ON "mcp_sse_event" ("session_id", "stream_id", "seq")`,
    );
    await q.query(`DROP TABLE "mcp_sse_stream"`);
  }
}
