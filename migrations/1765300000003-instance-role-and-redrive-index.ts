import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Two things issue 22 left for operators' reads:
 * - `service_instance.role`: the INSTANCE_ROLE an instance started with (all, web, worker), so `instances
 *   list` and the console say which instances run task work. Rows written before this migration are `all`
 *   (the only role there was).
 * - `task_redriven_from_idx`: the tasks `tasks retry` created from a task (`tasks show`, the console's task
 *   page) are found by index; partial, since almost no task is a redrive.
 */
export class InstanceRoleAndRedriveIndex1765300000003 implements MigrationInterface {
  name = 'InstanceRoleAndRedriveIndex1765300000003';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "service_instance" ADD "role" text NOT NULL DEFAULT 'all'`);
    await q.query(
      `ALTER TABLE "service_instance" ADD CONSTRAINT "service_instance_role_check" CHECK ("role" IN ('all', 'web', 'worker'))`,
    );
    await q.query(
      `CREATE INDEX "task_redriven_from_idx" ON "task" ("redriven_from") WHERE redriven_from IS NOT NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "task_redriven_from_idx"`);
    await q.query(`ALTER TABLE "service_instance" DROP CONSTRAINT "service_instance_role_check"`);
    await q.query(`ALTER TABLE "service_instance" DROP COLUMN "role"`);
  }
}
