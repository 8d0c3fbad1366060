import type { INestApplication } from '@nestjs/common';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import { ControlledExecutor, sleep } from '../../../test/support/controlled-executor.js';
import { TaskRunnerService } from '../execution/task-runner.service.js';
import { TaskError, TaskErrorCode } from '../tasks.errors.js';
import { TasksService } from './tasks.service.js';
import { TaskCreationService, type CreateTaskInput } from '../execution/task-creation.service.js';

/** Finished tasks answered from memory (FinishedTaskCache) must answer exactly as the database would. */
describe('finished tasks kept in memory after a read (real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let tasks: TasksService;
  let exec: ControlledExecutor;

  const input = (ownerId: string, ttlMs: number): CreateTaskInput => ({
    ownerId,
    era: 'modern',
    toolName: 'slow_tool',
    requestParams: { name: 'slow_tool', arguments: {} },
    requestedTtlMs: ttlMs,
  });

  beforeAll(async () => {
    db = await createTestDatabase('finished_cache');
    exec = new ControlledExecutor();
    app = await createTestApp(db.url, { JANITOR_ENABLED: 'false' }, [], { taskWork: exec });
    tasks = app.get(TasksService);
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  /** Completes the run and waits until its outcome is written (the first read to see it completed). */
  const finish = async (owner: string, id: string) => {
    (await exec.run(id)).complete();
    const r = await tasks.waitForTerminal(owner, id, { timeoutMs: 10000 });
    expect(r).toMatchObject({ kind: 'terminal', task: { status: 'completed' } });
  };
  const deleteRow = (id: string) =>
    withClient(db.url, (c) => c.query('DELETE FROM task WHERE id = $1', [id]));
  const notFound = async (p: Promise<unknown>) => {
    const err = await p.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TaskError);
    expect((err as TaskError).code).toBe(TaskErrorCode.TASK_NOT_FOUND);
  };

  it('answers a finished task from memory only until its ttl runs out', async () => {
    const t = (await app.get(TaskCreationService).create(input('fc-owner', 1500))).task;
    await finish('fc-owner', t.id);
    // Only the janitor deletes finished tasks, after ttl + grace; deleting early shows where the answer
    // comes from: memory, while the ttl runs.
    await deleteRow(t.id);
    await expect(tasks.get('fc-owner', t.id)).resolves.toMatchObject({ status: 'completed' });
    await sleep(1600);
    await notFound(tasks.get('fc-owner', t.id));
  });

  it('answers the first read after an outcome this instance committed from memory, not the database', async () => {
    const runner = app.get(TaskRunnerService);
    const t = (await app.get(TaskCreationService).create(input('fc-first', 60000))).task;
    const run = await exec.run(t.id);
    const recorded = runner.recordedOutcome(t.id);
    run.complete();
    // The run's recording has ended: the outcome committed, and no read of the task was made since.
    await expect(recorded).resolves.toMatchObject({ task: { status: 'completed' } });
    await deleteRow(t.id);
    await expect(tasks.get('fc-first', t.id)).resolves.toMatchObject({ id: t.id, status: 'completed' });
    // Keyed by owner: anyone else still reads the database, where there is nothing (of theirs).
    await notFound(tasks.get('fc-other', t.id));
  });

  it('never keeps a live task: the read after the end sees the end', async () => {
    const t = (await app.get(TaskCreationService).create(input('fc-live', 60000))).task;
    await expect(tasks.get('fc-live', t.id)).resolves.toMatchObject({ status: 'working' });
    await finish('fc-live', t.id);
    await expect(tasks.get('fc-live', t.id)).resolves.toMatchObject({ status: 'completed' });
  });

  it('answers another owner from the database: not found, as for a random id', async () => {
    const t = (await app.get(TaskCreationService).create(input('fc-alice', 60000))).task;
    await finish('fc-alice', t.id);
    await notFound(tasks.get('fc-mallory', t.id));
  });
});
