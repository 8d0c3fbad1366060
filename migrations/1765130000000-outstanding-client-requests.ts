import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * mcp_client_response records every server-to-client request when it is sent (payload NULL), so that any
 * instance can tell an answer to a request this session really has outstanding from one nothing asked for.
 * Only the former is stored, once, and `payload_bytes` counts it against the session's quota of parked
 * answers (QUOTA_CLIENT_RESPONSE_BYTES_PER_SESSION). Before this, any POSTed response with a `srv-` id was
 * written for five minutes whether or not the server had sent that request.
 */
export class OutstandingClientRequests1765130000000 implements MigrationInterface {
  name = 'OutstandingClientRequests1765130000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "mcp_client_response" ALTER COLUMN "payload" DROP NOT NULL`);
    await q.query(`ALTER TABLE "mcp_client_response" ADD "payload_bytes" integer NOT NULL DEFAULT 0`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "mcp_client_response" DROP COLUMN "payload_bytes"`);
    await q.query(`DELETE FROM "mcp_client_response" WHERE "payload" IS NULL`);
    await q.query(`ALTER TABLE "mcp_client_response" ALTER COLUMN "payload" SET NOT NULL`);
  }
}
