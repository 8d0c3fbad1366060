import { setTimeout as sleep } from 'node:timers/promises';
import { responseOf } from '../support/mcp-http.js';
import { startServer, stopServer, type ServerProcess } from '../support/server-process.js';
import { LegacyClient, modern, waitFor } from '../support/tasks-e2e.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

/**
 * A 2026-07-28 call whose inline window ends with no free worker slot becomes a queued task: the checkpoint
 * its inline run saved is written with the queued row, the inline run is fenced out, and the re-run goes on
 * from that checkpoint as attempt 2.
 */
describe('an inline call queued for want of a slot keeps its checkpoint', () => {
  let db: TestDatabase;
  let server: ServerProcess;

  beforeAll(async () => {
    db = await createTestDatabase('inline_queued_checkpoint');
    server = await startServer({
      DATABASE_URL: db.url,
      MCP_CONFORMANCE_FIXTURES: 'true',
      TASK_WORKER_CONCURRENCY: '1',
      // Long enough for the legacy task below to take the slot first, even on a loaded machine.
      TASK_INLINE_WINDOW_MS: '2000',
    });
  });
  afterAll(async () => {
    await stopServer(server, 'SIGKILL');
    await db.drop();
  });

  it('resumes the queued task from the inline checkpoint, as attempt 2', async () => {
    const url = `${server.baseUrl}/mcp`;
    const call = modern(url, 'tools/call', { name: 'durable_steps', arguments: { steps: 20, stepMs: 150 } });
    await sleep(300);
    // A legacy task takes the only slot while the call runs inline.
    const client = await LegacyClient.open(url);
    await client.createTask('slow_compute', { seconds: 3 });
    const created = responseOf(await call).result;
    expect(created.resultType).toBe('task');
    const done = await waitFor(
      () => modern(url, 'tasks/get', { taskId: created.taskId }).then((a) => responseOf(a).result),
      (t) => t.status !== 'working',
      { timeoutMs: 15000, intervalMs: 200, what: 'durable_steps to end' },
    );
    expect(done.status).toBe('completed');
    const out = done.result.structuredContent;
    expect(out.completedSteps).toBe(20);
    expect(out.attempts).toBe(2);
    expect(out.resumedFromStep).toBeGreaterThanOrEqual(3);
    const row = await withClient(
      db.url,
      async (c) =>
        (await c.query(`SELECT attempt, failed_attempts FROM task WHERE id = $1`, [created.taskId])).rows[0],
    );
    expect(row).toEqual({ attempt: 2, failed_attempts: 0 });
  });
});
