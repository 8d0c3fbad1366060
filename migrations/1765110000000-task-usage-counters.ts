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
 * - Single-row writes (creation, a worker's outcome, cancel, expiry on read): deferred constraint triggers,
 *   run at COMMIT, owner row then total row; the counter rows are locked for the commit only.
 * - Bulk statements (janitor batches, rescues, lease renewals that expire; their transactions set
 *   mcp.task_bulk = 'on'): statement triggers over the transition tables, one upsert ordered by key for
 *   the owner rows, then one for the total rows.
 * - Every transaction so takes counter rows in one global order (owner rows by key, then total rows by
 *   key), so they cannot deadlock over them. Exactly one of the two kinds counts each change: the row
 *   triggers stand aside in bulk transactions, the statement triggers outside them (inserts are always
 *   counted by the row trigger).
 * - Creation inserts its row first, then, in the round trip that commits, takes the creation advisory lock
 *   and checks the limits (task_check_creation_limits) against the counters, which do not include its own
 *   row yet. Every creation checked before it has committed (the lock is held until commit, and the
 *   deferred trigger counts at that commit), so none is missed and N parallel creations against a limit L
 *   leave exactly min(N, L); a finish not yet committed is not seen, exactly as with count(*). The lock is
 *   held for one round trip only, not across the application's turns between statements.
 */
/**
 * The statement trigger function for one bulk operation: what the statement added and took away, per owner
 * and stripe, upserted in key order (owner rows, then total rows). Shared with later migrations.
 */
export function usageBulkFunction(op: string, sources: string): string {
  return `
        CREATE FUNCTION "task_usage_bulk_${op}"() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF current_setting('mcp.task_bulk', true) IS DISTINCT FROM 'on' THEN
            RETURN NULL;
          END IF;
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
        END $$`;
}

/**
 * The row trigger function. `bulkInserts`: inserts in a bulk transaction stand aside too (a statement
 * trigger counts them; migration TaskUsageBulkInsert); without it, inserts are always counted here.
 */
export function usageRowFunction(bulkInserts: boolean): string {
  const bulkInsertGuard = bulkInserts
    ? `
        IF TG_OP = 'INSERT' AND current_setting('mcp.task_bulk', true) IS NOT DISTINCT FROM 'on' THEN
          RETURN NULL; -- counted by the statement trigger
        END IF;`
    : '';
  return `
      CREATE FUNCTION "task_usage_row"() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        owner text;
        task_id text;
        d_live int := 0;
        d_retained int := 0;
        s smallint;
      BEGIN${bulkInsertGuard}
        IF TG_OP = 'INSERT' THEN
          owner := NEW.owner_id; task_id := NEW.id;
          IF NEW.status IN ${LIVE} THEN d_live := 1; ELSE d_retained := 1; END IF;
        ELSIF current_setting('mcp.task_bulk', true) IS NOT DISTINCT FROM 'on' THEN
          RETURN NULL; -- counted by the statement trigger
        ELSIF TG_OP = 'DELETE' THEN
          owner := OLD.owner_id; task_id := OLD.id;
          IF OLD.status IN ${LIVE} THEN d_live := -1; ELSE d_retained := -1; END IF;
        ELSE
          owner := NEW.owner_id; task_id := NEW.id;
          IF NEW.status IN ${LIVE} THEN d_live := 1; d_retained := -1; ELSE d_live := -1; d_retained := 1; END IF;
        END IF;
        s := (abs(hashtext(task_id)) % ${STRIPES})::smallint;
        INSERT INTO "task_usage" AS u (owner_id, stripe, live, retained)
        VALUES (owner, s, d_live, d_retained)
        ON CONFLICT (owner_id, stripe)
          DO UPDATE SET live = u.live + EXCLUDED.live, retained = u.retained + EXCLUDED.retained;
        IF d_live <> 0 THEN
          INSERT INTO "task_usage_total" AS u (stripe, live) VALUES (s, d_live)
          ON CONFLICT (stripe) DO UPDATE SET live = u.live + EXCLUDED.live;
        END IF;
        RETURN NULL;
      END $$`;
}

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
    // Bulk statements (janitor batches, rescues): one function per operation, from the transition tables,
    // what the statement added (new rows, +1) and took away (old rows, -1), per owner and stripe, upserted
    // in key order. They act only in transactions marked mcp.task_bulk = 'on'.
    for (const [op, sources] of [
      ['delete', `SELECT owner_id, id, status, -1 AS sign FROM old_rows`],
      [
        'update',
        `SELECT owner_id, id, status, 1 AS sign FROM new_rows
         UNION ALL SELECT owner_id, id, status, -1 FROM old_rows`,
      ],
    ] as const) {
      await q.query(usageBulkFunction(op, sources));
    }
    // Everything else, row by row at COMMIT (deferred constraint triggers): inserts always; updates that
    // change a row's liveness and deletes unless the transaction is bulk. Counting at commit keeps the
    // counter rows locked for the commit only, never across the application's turns between statements.
    // NEW/OLD are the row as that statement saw it, so several changes of one row in one transaction each
    // count their own step and the sum comes out right.
    await q.query(usageRowFunction(false));
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
      CREATE CONSTRAINT TRIGGER "task_usage_row_insert" AFTER INSERT ON "task"
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "task_usage_row"()`);
    await q.query(`
      CREATE CONSTRAINT TRIGGER "task_usage_row_update" AFTER UPDATE ON "task"
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
      WHEN ((OLD.status IN ${LIVE}) IS DISTINCT FROM (NEW.status IN ${LIVE}))
      EXECUTE FUNCTION "task_usage_row"()`);
    await q.query(`
      CREATE CONSTRAINT TRIGGER "task_usage_row_delete" AFTER DELETE ON "task"
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "task_usage_row"()`);
    await q.query(`
      CREATE TRIGGER "task_usage_bulk_delete" AFTER DELETE ON "task" REFERENCING OLD TABLE AS old_rows
      FOR EACH STATEMENT EXECUTE FUNCTION "task_usage_bulk_delete"()`);
    await q.query(`
      CREATE TRIGGER "task_usage_bulk_update" AFTER UPDATE ON "task"
      REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION "task_usage_bulk_update"()`);
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
    for (const trigger of ['row_insert', 'row_update', 'row_delete', 'bulk_delete', 'bulk_update']) {
      await q.query(`DROP TRIGGER "task_usage_${trigger}" ON "task"`);
    }
    for (const fn of ['row', 'bulk_delete', 'bulk_update'])
      await q.query(`DROP FUNCTION "task_usage_${fn}"()`);
    await q.query(`DROP TABLE "task_usage_total"`);
    await q.query(`DROP TABLE "task_usage"`);
  }
}
