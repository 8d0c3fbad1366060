import { responseOf } from '../support/mcp-http.js';
import { runServer, startServer, stopServer, type ServerProcess } from '../support/server-process.js';
import { LegacyClient, modern, waitFor } from '../support/tasks-e2e.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const CLIENTS = 8;

/**
 * The smallest pool DB_POOL_MAX accepts boots and serves: the boot's migrations and statement-mode probe
 * take their connections one after the other (side by side they deadlocked a pool of two, and the server
 * exited after the pool's connect timeout), and more clients than connections still get every answer.
 */
describe('a pool of two connections', () => {
  let db: TestDatabase;
  let server: ServerProcess;

  beforeAll(async () => {
    db = await createTestDatabase('small_pool');
    // A fresh database: the boot applies every migration on the two connections.
    server = await startServer({
      DATABASE_URL: db.url,
      DB_POOL_MAX: '2',
      MCP_CONFORMANCE_FIXTURES: 'true',
      TASK_POLL_INTERVAL_MS: '100',
    });
  });
  afterAll(async () => {
    if (server) await stopServer(server);
    await db.drop();
  });

  it('boots, is ready, and serves tasks of both eras to more clients than connections', async () => {
    const ready = await fetch(`${server.baseUrl}/health/ready`);
    expect(ready.status).toBe(200);
    const url = `${server.baseUrl}/mcp`;

    const legacy = Promise.all(
      Array.from({ length: CLIENTS }, async (_, i) => {
        const client = await LegacyClient.open(url);
        const task = await client.createTask('slow_compute', { seconds: 0.2, label: `legacy${i}` });
        const done = await waitFor(
          () => client.result('tasks/get', { taskId: task.taskId }),
          (t) => t.status !== 'working',
          { intervalMs: 100, what: `legacy task ${i}` },
        );
        const result = await client.result('tasks/result', { taskId: task.taskId });
        return `${done.status} ${JSON.stringify(result.content)}`;
      }),
    );
    const inline = Promise.all(
      Array.from({ length: CLIENTS }, async (_, i) => {
        const answer = responseOf(
          await modern(url, 'tools/call', {
            name: 'slow_compute',
            arguments: { seconds: 0, label: `modern${i}` },
          }),
        );
        return `${answer?.result?.resultType} ${JSON.stringify(answer?.result?.content)}`;
      }),
    );
    const [legacyEnds, inlineEnds] = await Promise.all([legacy, inline]);
    expect(legacyEnds).toEqual(
      Array.from({ length: CLIENTS }, (_, i) => expect.stringMatching(new RegExp(`^completed .*legacy${i}`))),
    );
    expect(inlineEnds).toEqual(
      Array.from({ length: CLIENTS }, (_, i) => expect.stringMatching(new RegExp(`^complete .*modern${i}`))),
    );
  });

  it('refuses a pool of one at once, naming DB_POOL_MAX and its smallest value', async () => {
    const run = runServer({ DATABASE_URL: db.url, DB_POOL_MAX: '1' });
    const started = Date.now();
    expect(await run.exited).not.toBe(0);
    expect(Date.now() - started).toBeLessThan(8000);
    expect(run.output()).toMatch(/DB_POOL_MAX must be an integer between 2 and 200/);
    expect(run.output()).not.toMatch(/listening on/);
  });
});
