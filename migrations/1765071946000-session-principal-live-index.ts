import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * mcp_session: the live sessions of one principal are counted at every initialize (the
 * QUOTA_SESSIONS_PER_PRINCIPAL quota); a partial index keeps that count off a table scan.
 */
export class SessionPrincipalLiveIndex1765071946000 implements MigrationInterface {
  name = 'SessionPrincipalLiveIndex1765071946000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE INDEX "mcp_session_principal_live_idx" ON "mcp_session" ("principal_id") WHERE "ended_at" IS NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "mcp_session_principal_live_idx"`);
  }
}
