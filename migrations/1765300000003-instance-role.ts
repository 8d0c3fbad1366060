import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `service_instance.role`: the INSTANCE_ROLE an instance started with (all, web, worker), so `instances list`
 * and the console say which instances serve /mcp and which run task work (a leftover of issue 22). Rows
 * written before this migration are `all`, the only role there was.
 */
export class InstanceRole1765300000003 implements MigrationInterface {
  name = 'InstanceRole1765300000003';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "service_instance" ADD "role" text NOT NULL DEFAULT 'all'`);
    await q.query(
      `ALTER TABLE "service_instance" ADD CONSTRAINT "service_instance_role_check" CHECK ("role" IN ('all', 'web', 'worker'))`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "service_instance" DROP CONSTRAINT "service_instance_role_check"`);
    await q.query(`ALTER TABLE "service_instance" DROP COLUMN "role"`);
  }
}
