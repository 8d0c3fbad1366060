import type { INestApplication } from '@nestjs/common';
import pg from 'pg';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import {
  ControlledExecutor,
  metricValue,
  sleep,
  waitFor,
} from '../../../test/support/controlled-executor.js';
import { TaskRunnerService } from './task-runner.service.js';
import { TaskCreationService, type CreateTaskInput } from '../execution/task-creation.service.js';

const LOCK_TIMEOUT_MS = 200;

/**
 * Runs that outlive their application's shutdown (real PostgreSQL). The shutdown's own pass fails or hands
 * over every run it finds; a run a claim started after that pass (the claimer and the runner shut down side
 * by side), or a final write still retrying when the application's pool goes away, must not keep writing for
 * TASK_WRITE_RETRY_MS against a pool that is closed: each gives up at its next failure, and the lease lapses
 * for the janitor. Seen before the fix as a runner of a closed test app retrying a fail write for minutes.
 */
describe('task writes after the application shut down (real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runner: TaskRunnerService;
  let exec: ControlledExecutor;

  const input = (ownerId: string): CreateTaskInput => ({
    ownerId,
    era: 'modern',
    sessionId: null,
    toolName: 'late_tool',
    requestParams: { name: 'late_tool', arguments: {} },
  });
  const statusOf = async (id: string): Promise<string> =>
    (await withClient(db.url, (c) => c.query('SELECT status FROM task WHERE id = $1', [id]))).rows[0].status;
  const writeFailures = () => metricValue(app, 'mcp_task_write_failures_total', { op: 'complete' });

  beforeAll(async () => {
    db = await createTestDatabase('task_shutdown_writes');
    exec = new ControlledExecutor();
    app = await createTestApp(
      db.url,
      {
        JANITOR_ENABLED: 'false',
        TASK_LOCK_TIMEOUT_MS: String(LOCK_TIMEOUT_MS),
        // Far longer than the test: only the shutdown can end these retries in time.
        TASK_WRITE_RETRY_MS: '120000',
      },
      [],
      { taskWork: exec },
    );
    runner = app.get(TaskRunnerService);
    // The shutdown's own pass, with no run here yet: what follows starts after it, as a late claim would.
    await runner.beforeApplicationShutdown();
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('a final write retrying behind a lock gives up at its next failure once the application shut down', async () => {
    const t = (await app.get(TaskCreationService).create(input('owner-retrying'))).task;
    const run = await exec.run(t.id, 0);
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM task WHERE id = $1 FOR UPDATE', [t.id]);
      const retriesBefore = await metricValue(app, 'mcp_task_write_retries_total', { op: 'complete' });
      const failuresBefore = await writeFailures();
      run.complete();
      // Retrying: at least one attempt ran into the lock.
      await sleep(3 * LOCK_TIMEOUT_MS);
      expect(await writeFailures()).toBe(failuresBefore);
      runner.onApplicationShutdown();
      // The next failure ends the retries (backoff at most 2 s), counted like any write given up.
      await waitFor(async () => ((await writeFailures()) > failuresBefore ? true : undefined), 6000);
      expect(await metricValue(app, 'mcp_task_write_retries_total', { op: 'complete' })).toBe(retriesBefore);
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    // Nothing is written after the lock is gone either: the task is left to its lease.
    await sleep(500);
    expect(await statusOf(t.id)).toBe('working');
  });

  it('a run started after the application shut down writes nothing', async () => {
    runner.onApplicationShutdown();
    const t = (await app.get(TaskCreationService).create(input('owner-late'))).task;
    const run = await exec.run(t.id, 0);
    run.complete();
    await sleep(500);
    expect(await statusOf(t.id)).toBe('working');
  });
});
