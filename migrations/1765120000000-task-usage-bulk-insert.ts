import type { MigrationInterface, QueryRunner } from 'typeorm';
import { usageBulkFunction, usageRowFunction } from './1765110000000-task-usage-counters.js';

/**
 * Bulk inserts count like bulk updates and deletes: in a transaction marked mcp.task_bulk = 'on', the row
 * trigger stands aside for inserts too, and a statement trigger over the inserted rows upserts the counters
 * in key order (owner rows, then total rows). A multi-row insert (a commit group of creations) counted row
 * by row would take owner and total rows interleaved, out of the one global order every other transaction
 * keeps, and could deadlock with them. Outside bulk transactions nothing changes.
 */
export class TaskUsageBulkInsert1765120000000 implements MigrationInterface {
  name = 'TaskUsageBulkInsert1765120000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(usageBulkFunction('insert', `SELECT owner_id, id, status, 1 AS sign FROM new_rows`));
    await q.query(usageRowFunction(true).replace('CREATE FUNCTION', 'CREATE OR REPLACE FUNCTION'));
    await q.query(`
      CREATE TRIGGER "task_usage_bulk_insert" AFTER INSERT ON "task" REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION "task_usage_bulk_insert"()`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER "task_usage_bulk_insert" ON "task"`);
    await q.query(usageRowFunction(false).replace('CREATE FUNCTION', 'CREATE OR REPLACE FUNCTION'));
    await q.query(`DROP FUNCTION "task_usage_bulk_insert"()`);
  }
}
