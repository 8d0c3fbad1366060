import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * principal: every authenticated identity, keyed by the stable id that sessions and tasks store.
 * api_key: service-account keys, stored as a SHA-256 of the whole key.
 */
export class CreatePrincipalAndApiKey1764460200000 implements MigrationInterface {
  name = 'CreatePrincipalAndApiKey1764460200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE "principal" (
        "id" text NOT NULL,
        "provider" text NOT NULL,
        "issuer" text,
        "subject" text NOT NULL,
        "display_name" text,
        "email" text,
        "created_at" TIMESTAMP WITH TIME ZONE NOT NULL,
        "last_seen_at" TIMESTAMP WITH TIME ZONE NOT NULL,
        CONSTRAINT "PK_principal" PRIMARY KEY ("id")
      )`);
    await q.query(`
      CREATE TABLE "api_key" (
        "id" text NOT NULL,
        "name" text NOT NULL,
        "secret_sha256" text NOT NULL,
        "scopes" text array NOT NULL,
        "created_at" TIMESTAMP WITH TIME ZONE NOT NULL,
        "revoked_at" TIMESTAMP WITH TIME ZONE,
        CONSTRAINT "PK_api_key" PRIMARY KEY ("id")
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "api_key"`);
    await q.query(`DROP TABLE "principal"`);
  }
}
