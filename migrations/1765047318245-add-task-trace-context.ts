import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * task.trace_context: the W3C trace context (traceparent, tracestate) of the span that created the task, so
 * its background run, janitor actions and notifications join that trace on whichever instance they happen.
 * Null when the creating request was not traced.
 */
export class AddTaskTraceContext1765047318245 implements MigrationInterface {
  name = 'AddTaskTraceContext1765047318245';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "task" ADD COLUMN "trace_context" jsonb`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "task" DROP COLUMN "trace_context"`);
  }
}
