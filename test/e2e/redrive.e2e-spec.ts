import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT, startServer, stopServer, type ServerProcess } from '../support/server-process.js';
import { LegacyClient, waitFor } from '../support/tasks-e2e.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

interface TaskRow {
  id: string;
  status: string;
  instance_id: string | null;
  redriven_from: string | null;
  error: { message?: string } | null;
  result: { content?: { text?: string }[] } | null;
}

/**
 * Redrive end to end (issue 22, item 9): a task failed by a deploy (its server shut down mid-run, and the
 * tool is not resumable) is retried by the operator CLI, a separate process that only writes the database;
 * the running server's claimer hears the queue notice and runs the new task to completion.
 */
describe('tasks retry: a failed task redriven by the CLI completes on a running server', () => {
  let db: TestDatabase;
  let server: ServerProcess | undefined;

  const cli = async (...argv: string[]): Promise<{ code: number; out: string; err: string }> => {
    try {
      const { stdout, stderr } = await promisify(execFile)(
        process.execPath,
        [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), ...argv],
        { env: { PATH: process.env.PATH, DATABASE_URL: db.url } },
      );
      return { code: 0, out: stdout.trim(), err: stderr };
    } catch (e) {
      const err = e as { code: number; stdout: string; stderr: string };
      return { code: err.code, out: err.stdout.trim(), err: err.stderr };
    }
  };
  const row = (id: string): Promise<TaskRow | undefined> =>
    withClient(db.url, async (c) => {
      const r = await c.query<TaskRow>(
        'SELECT id, status, instance_id, redriven_from, error, result FROM task WHERE id = $1',
        [id],
      );
      return r.rows[0];
    });

  beforeAll(async () => {
    db = await createTestDatabase('redrive');
  });
  afterAll(async () => {
    if (server) await stopServer(server);
    await db.drop();
  });

  it('fails at shutdown, is retried as a new linked task, and the next server completes it', async () => {
    const env = {
      DATABASE_URL: db.url,
      MCP_CONFORMANCE_FIXTURES: 'true',
      SHUTDOWN_GRACE_MS: '200',
      SHUTDOWN_DRAIN_DELAY_MS: '0',
    };
    const first = await startServer(env);
    let old: string;
    try {
      const client = await LegacyClient.open(`${first.baseUrl}/mcp`);
      old = (await client.createTask('slow_compute', { seconds: 2, label: 'redriven' })).taskId;
    } finally {
      await stopServer(first);
    }
    expect(await row(old)).toMatchObject({ status: 'failed', error: { message: 'server shutting down' } });
    server = await startServer(env);
    const retried = await cli('tasks', 'retry', old);
    expect(retried).toMatchObject({ code: 0, err: '' });
    const id = retried.out;
    const done = await waitFor(
      () => row(id),
      (r) => r?.status === 'completed' || r?.status === 'failed',
      { timeoutMs: 15_000, what: 'the redriven task to finish' },
    );
    expect(done).toMatchObject({ status: 'completed', redriven_from: old });
    expect(done?.result?.content?.[0]?.text).toBe('Computed redriven after 2 s');
    // Both directions in tasks show.
    expect(JSON.parse((await cli('tasks', 'show', old, '--json')).out)).toMatchObject({ redrivenAs: [id] });
    expect(JSON.parse((await cli('tasks', 'show', id, '--json')).out)).toMatchObject({
      redrivenFrom: old,
      redrivenAs: [],
      status: 'completed',
    });
  }, 60_000);
});
