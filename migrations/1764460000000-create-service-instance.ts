import type { MigrationInterface, QueryRunner } from 'typeorm';

/** service_instance: one row per server process, with a heartbeat operators and later sweeps can read. */
export class CreateServiceInstance1764460000000 implements MigrationInterface {
  name = 'CreateServiceInstance1764460000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE "service_instance" (
        "id" uuid NOT NULL,
        "hostname" text NOT NULL,
        "pid" integer NOT NULL,
        "version" text NOT NULL,
        "started_at" TIMESTAMP WITH TIME ZONE NOT NULL,
        "heartbeat_at" TIMESTAMP WITH TIME ZONE NOT NULL,
        "stopped_at" TIMESTAMP WITH TIME ZONE,
        CONSTRAINT "PK_service_instance" PRIMARY KEY ("id")
      )`);
    await q.query(`CREATE INDEX "service_instance_heartbeat_idx" ON "service_instance" ("heartbeat_at")`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "service_instance_heartbeat_idx"`);
    await q.query(`DROP TABLE "service_instance"`);
  }
}
