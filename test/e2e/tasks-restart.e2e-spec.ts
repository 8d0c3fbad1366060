import { responseOf } from '../support/mcp-http.js';
import { startServer, stopServer, type ServerProcess } from '../support/server-process.js';
import { LegacyClient, modern, RELATED_TASK, waitFor } from '../support/tasks-e2e.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

/**
 * Durability across a crash: the built server, spawned, killed with SIGKILL mid-task, and started again on
 * the same database. Short heartbeat, lease and janitor intervals make recovery a matter of seconds.
 */
describe('tasks across a kill -9 and a restart (spawned servers, one database)', () => {
  let db: TestDatabase;
  const servers: ServerProcess[] = [];

  const env = (): Record<string, string> => ({
    DATABASE_URL: db.url,
    MCP_CONFORMANCE_FIXTURES: 'true',
    INSTANCE_HEARTBEAT_MS: '1000',
    TASK_LEASE_MS: '2000',
    JANITOR_INTERVAL_MS: '1000',
  });

  beforeAll(async () => {
    db = await createTestDatabase('tasks_restart');
  });
  afterAll(async () => {
    for (const s of servers) await stopServer(s, 'SIGKILL');
    await db.drop();
  });

  it('keeps finished tasks readable with their results and fails the ones that were running', async () => {
    const first = await startServer(env());
    servers.push(first);
    const url1 = `${first.baseUrl}/mcp`;
    const legacy = await LegacyClient.open(url1);

    const done = await legacy.createTask('slow_compute', { seconds: 0, label: 'durable' });
    await waitFor(
      async () => (await legacy.result('tasks/get', { taskId: done.taskId })).status,
      (s) => s === 'completed',
    );
    const resultBefore = await legacy.result('tasks/result', { taskId: done.taskId });
    const running = await legacy.createTask('slow_compute', { seconds: 60 });

    const modernTask = async (seconds: number) =>
      responseOf(
        await modern(url1, 'tools/call', { name: 'slow_compute', arguments: { seconds, label: 'm' } }),
      ).result;
    const modernDone = await modernTask(0.3);
    expect(modernDone.resultType).toBe('task');
    const modernRunning = await modernTask(60);
    expect(modernRunning.resultType).toBe('task');
    const modernGet = async (url: string, taskId: string) =>
      responseOf(await modern(url, 'tasks/get', { taskId })).result;
    await waitFor(
      () => modernGet(url1, modernDone.taskId),
      (t) => t.status === 'completed',
    );

    first.proc.kill('SIGKILL');
    await first.exited;

    const second = await startServer(env());
    servers.push(second);
    const url2 = `${second.baseUrl}/mcp`;
    // The same session, persisted, now served by the new process.
    const again = legacy.at(url2);

    const finished = await again.result('tasks/get', { taskId: done.taskId });
    expect(finished).toMatchObject({ taskId: done.taskId, status: 'completed' });
    const resultAfter = await again.result('tasks/result', { taskId: done.taskId });
    expect(resultAfter).toEqual(resultBefore);
    expect(resultAfter.content).toEqual([{ type: 'text', text: 'Computed durable after 0 s' }]);
    expect(resultAfter._meta[RELATED_TASK]).toEqual({ taskId: done.taskId });
    const modernFinished = await modernGet(url2, modernDone.taskId);
    expect(modernFinished.status).toBe('completed');
    expect(modernFinished.result.content).toEqual([{ type: 'text', text: 'Computed m after 0.3 s' }]);

    const restartedAt = Date.now();
    const lost = await waitFor(
      () => again.result('tasks/get', { taskId: running.taskId }),
      (t) => t.status !== 'working',
      { timeoutMs: 20000, intervalMs: 250, what: 'the running task to be failed' },
    );
    expect(Date.now() - restartedAt).toBeLessThan(15000);
    expect(lost.status).toBe('failed');
    expect(lost.statusMessage).toMatch(/worker lost|stopped/);
    const lostResult = await again.call('tasks/result', { taskId: running.taskId });
    expect(lostResult.error).toEqual(
      expect.objectContaining({ message: expect.stringMatching(/worker lost|stopped/) }),
    );

    const modernLost = await waitFor(
      () => modernGet(url2, modernRunning.taskId),
      (t) => t.status !== 'working',
      { timeoutMs: 20000, intervalMs: 250 },
    );
    expect(modernLost.status).toBe('failed');
    expect(modernLost.error).toEqual(
      expect.objectContaining({ code: expect.any(Number), message: expect.any(String) }),
    );

    // Nothing is left working anywhere in the table.
    const live = await withClient(db.url, (c) =>
      c.query(`SELECT count(*)::int AS n FROM task WHERE status IN ('working', 'input_required')`),
    );
    expect(live.rows[0].n).toBe(0);
    expect(await stopServer(second, 'SIGTERM')).toBe(0);
  });
});
