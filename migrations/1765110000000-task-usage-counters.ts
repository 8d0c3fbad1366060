import type { MigrationInterface, QueryRunner } from 'typeorm';

const LIVE = `('working', 'input_required')`;
const STRIPES = 64;

/**
 * Usage counters for the creation limits. Every creation used to count the owner's live and finished rows
 * and every live row under the creation lock: O(rows), so an owner keeping 10,000 finished tasks (the
 * default QUOTA_RETAINED_TASKS_PER_OWNER) paid for 10,000 index entries on each create.
 *
 * - task_usage (owner, stripe): live and retained (finished, not yet deleted) tasks of one owner;
 *   task_usage_total (stripe): live tasks of all owners. A task's stripe is a hash of its id, so two
 *   transactions that finish different tasks rarely wait for the same counter row.
 * - Updates and deletes: statement-level triggers, from the rows the statement actually changed
 *   (transition tables), each in one upsert ordered by key: owner rows first, then total rows, so two
 *   transactions that change several counters take their row locks in one order and cannot deadlock.
 * - Inserts: a deferred constraint trigger, run at COMMIT (owner row, then total row, the same order).
 * - Creation inserts its row first, then, in the round trip that commits, takes the creation advisory lock
 *   and checks the limits (task_check_creation_limits) against the counters, which do not include its own
 *   row yet. Every creation checked before it has committed (the lock is held until commit, and the
 *   deferred trigger counts at that commit), so none is missed and N parallel creations against a limit L
 *   leave exactly min(N, L); a finish not yet committed is not seen, exactly as with count(*). The lock is
 *   held for one round trip only, not across the application's turns between statements.
 */
export class TaskUsageCounters1765110000000 implements MigrationInterface {
  name = 'TaskUsageCounters1765110000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE "task_usage" (
        "owner_id" text NOT NULL,
        "stripe" smallint NOT NULL,
        "live" integer NOT NULL DEFAULT 0,
        "retained" integer NOT NULL DEFAULT 0,
        CONSTRAINT "PK_task_usage" PRIMARY KEY ("owner_id", "stripe"))`);
    await q.query(`
      CREATE TABLE "task_usage_total" (
        "stripe" smallint NOT NULL,
        "live" integer NOT NULL DEFAULT 0,
        CONSTRAINT "PK_task_usage_total" PRIMARY KEY ("stripe"))`);
    // One function per operation: what the statement added (new rows, +1) and took away (old rows, -1),
    // per owner and stripe; an update that did not change a row's liveness cancels out to nothing.
    for (const [op, sources] of [
      ['delete', `SELECT owner_id, id, status, -1 AS sign FROM old_rows`],
      [
        'update',
        `SELECT owner_id, id, status, 1 AS sign FROM new_rows
         UNION ALL SELECT owner_id, id, status, -1 FROM old_rows`,
      ],
    ] as const) {
      await q.query(`
        CREATE FUNCTION "task_usage_on_${op}"() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          WITH changed AS (${sources}),
          delta AS (
            SELECT owner_id, (abs(hashtext(id)) % ${STRIPES})::smallint AS stripe,
                   sum(CASE WHEN status IN ${LIVE} THEN sign ELSE 0 END)::int AS live,
                   sum(CASE WHEN status IN ${LIVE} THEN 0 ELSE sign END)::int AS retained
              FROM changed GROUP BY 1, 2)
          INSERT INTO "task_usage" AS u (owner_id, stripe, live, retained)
          SELECT owner_id, stripe, live, retained FROM delta WHERE live <> 0 OR retained <> 0
           ORDER BY owner_id, stripe
          ON CONFLICT (owner_id, stripe)
            DO UPDATE SET live = u.live + EXCLUDED.live, retained = u.retained + EXCLUDED.retained;
          WITH changed AS (${sources}),
          delta AS (
            SELECT (abs(hashtext(id)) % ${STRIPES})::smallint AS stripe,
                   sum(CASE WHEN status IN ${LIVE} THEN sign ELSE 0 END)::int AS live
              FROM changed GROUP BY 1)
          INSERT INTO "task_usage_total" AS u (stripe, live)
          SELECT stripe, live FROM delta WHERE live <> 0 ORDER BY stripe
          ON CONFLICT (stripe) DO UPDATE SET live = u.live + EXCLUDED.live;
          RETURN NULL;
        END $$`);
    }
    // An insert is counted at its transaction's commit (a deferred constraint trigger): the creation limit
    // check runs in that same last round trip, so the counter rows are locked only for the commit itself.
    await q.query(`
      CREATE FUNCTION "task_usage_on_insert"() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        s smallint := (abs(hashtext(NEW.id)) % ${STRIPES})::smallint;
        is_live boolean := NEW.status IN ${LIVE};
      BEGIN
        -- NEW is the row as inserted; a later update or delete in the same transaction counted its own
        -- change from that row, so the sum comes out right whatever happened in between.
        INSERT INTO "task_usage" AS u (owner_id, stripe, live, retained)
        VALUES (NEW.owner_id, s, is_live::int, (NOT is_live)::int)
        ON CONFLICT (owner_id, stripe)
          DO UPDATE SET live = u.live + EXCLUDED.live, retained = u.retained + EXCLUDED.retained;
        IF is_live THEN
          INSERT INTO "task_usage_total" AS u (stripe, live) VALUES (s, 1)
          ON CONFLICT (stripe) DO UPDATE SET live = u.live + 1;
        END IF;
        RETURN NULL;
      END $$`);
    // The creation limits, checked under the creation advisory lock after the new row is in (it is not
    // counted yet: see above). Each refusal has its own SQLSTATE, which the registry maps to its error.
    await q.query(`
      CREATE FUNCTION "task_check_creation_limits"(p_owner text, p_max_owner int, p_max_retained int, p_max_total int)
      RETURNS void LANGUAGE plpgsql AS $$
      DECLARE
        owner_live bigint;
        owner_retained bigint;
        total_live bigint;
      BEGIN
        SELECT coalesce(sum(live), 0), coalesce(sum(retained), 0) INTO owner_live, owner_retained
          FROM "task_usage" WHERE owner_id = p_owner;
        IF owner_live >= p_max_owner THEN
          RAISE EXCEPTION 'task limit: live tasks of this owner' USING ERRCODE = 'MCPLO';
        END IF;
        IF owner_retained >= p_max_retained THEN
          RAISE EXCEPTION 'task limit: finished tasks of this owner' USING ERRCODE = 'MCPLR';
        END IF;
        SELECT coalesce(sum(live), 0) INTO total_live FROM "task_usage_total";
        IF total_live >= p_max_total THEN
          RAISE EXCEPTION 'task limit: live tasks' USING ERRCODE = 'MCPLT';
        END IF;
      END $$`);
    // CREATE TRIGGER locks the table against writes until this migration commits, so the backfill below
    // and the triggers see the same rows: nothing is counted twice or missed.
    await q.query(`LOCK TABLE "task" IN SHARE ROW EXCLUSIVE MODE`);
    await q.query(`
      CREATE CONSTRAINT TRIGGER "task_usage_insert" AFTER INSERT ON "task"
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "task_usage_on_insert"()`);
    await q.query(`
      CREATE TRIGGER "task_usage_delete" AFTER DELETE ON "task" REFERENCING OLD TABLE AS old_rows
      FOR EACH STATEMENT EXECUTE FUNCTION "task_usage_on_delete"()`);
    await q.query(`
      CREATE TRIGGER "task_usage_update" AFTER UPDATE ON "task"
      REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION "task_usage_on_update"()`);
    await q.query(`
      INSERT INTO "task_usage" (owner_id, stripe, live, retained)
      SELECT owner_id, (abs(hashtext(id)) % ${STRIPES})::smallint,
             count(*) FILTER (WHERE status IN ${LIVE}), count(*) FILTER (WHERE status NOT IN ${LIVE})
        FROM "task" GROUP BY 1, 2`);
    await q.query(`
      INSERT INTO "task_usage_total" (stripe, live)
      SELECT (abs(hashtext(id)) % ${STRIPES})::smallint, count(*) FROM "task"
       WHERE status IN ${LIVE} GROUP BY 1`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP FUNCTION "task_check_creation_limits"(text, int, int, int)`);
    for (const op of ['insert', 'delete', 'update']) {
      await q.query(`DROP TRIGGER "task_usage_${op}" ON "task"`);
      await q.query(`DROP FUNCTION "task_usage_on_${op}"()`);
    }
    await q.query(`DROP TABLE "task_usage_total"`);
    await q.query(`DROP TABLE "task_usage"`);
  }
}
