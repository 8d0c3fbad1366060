import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * task.change_version: a per-row counter of what clients are told about (status, status message, result,
 * error, input requests). A BEFORE UPDATE trigger bumps it, so every write path, present or future, counts
 * without having to remember to, and lease renewals (which change none of those) do not. Bumped under the
 * row lock, it grows in commit order: a listener that missed NOTIFYs compares it with the last version it
 * sent and catches up from the table, never sending an older state after a newer one.
 */
export class TaskChangeVersion1765031500000 implements MigrationInterface {
  name = 'TaskChangeVersion1765031500000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "task" ADD "change_version" bigint NOT NULL DEFAULT '0'`);
    await q.query(`
      CREATE FUNCTION "task_bump_change_version"() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF (NEW.status, NEW.status_message, NEW.result, NEW.error, NEW.input_requests)
           IS DISTINCT FROM (OLD.status, OLD.status_message, OLD.result, OLD.error, OLD.input_requests) THEN
          NEW.change_version := OLD.change_version + 1;
        ELSE
          NEW.change_version := OLD.change_version;
        END IF;
        RETURN NEW;
      END
      $$`);
    await q.query(`
      CREATE TRIGGER "task_change_version" BEFORE UPDATE ON "task"
      FOR EACH ROW EXECUTE FUNCTION "task_bump_change_version"()`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER "task_change_version" ON "task"`);
    await q.query(`DROP FUNCTION "task_bump_change_version"()`);
    await q.query(`ALTER TABLE "task" DROP COLUMN "change_version"`);
  }
}
