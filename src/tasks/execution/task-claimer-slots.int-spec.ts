import type { INestApplication } from '@nestjs/common';
import { ControlledExecutor, sleep } from '../../../test/support/controlled-executor.js';
import { legacyTaskInput } from '../../../test/support/task-registry.js';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.js';
import { TaskClaimer } from './task-claimer.service.js';
import { QUEUED_MESSAGE } from '../task-queue.js';
import { TaskQueueRepository } from '../store/task-queue.repository.js';
import { TasksService } from '../registry/tasks.service.js';
import { TaskCreationService } from '../execution/task-creation.service.js';

const PRINCIPAL = { id: 'o-slots', provider: 'proxy', subject: 'alice', scopes: [], groups: [] };

/**
 * A claim holds the slots it asks for during its round trip, and a creation that finds none free is
 * queued instead of leased to this instance. Claims that asked for every free slot whatever waited (a
 * safety poll over an empty queue, each notice of one task) queued the creations arriving meanwhile, and
 * their notices asked again: under steady load half the tasks went through the queue (issue 22's
 * lifecycle bench: 2 tasks/get per lifecycle instead of 1, half the rate). The claims are recorded on the
 * real repository, which still runs them.
 */
describe('task claimer: what a claim asks for (real PostgreSQL)', () => {
  let db: TestDatabase;
  let web: INestApplication;
  let worker: INestApplication;
  let exec: ControlledExecutor;
  const asked: number[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('task_claimer_slots');
    exec = new ControlledExecutor();
    web = await createTestApp(db.url, { JANITOR_ENABLED: 'false', INSTANCE_ROLE: 'web' });
    // The safety poll is run by the test itself (10 minutes apart otherwise).
    worker = await createTestApp(
      db.url,
      { JANITOR_ENABLED: 'false', TASK_WORKER_CONCURRENCY: '8', TASK_CLAIM_POLL_MS: '600000' },
      [],
      { taskWork: exec },
    );
    const repo = worker.get(TaskQueueRepository);
    const claim = repo.claim.bind(repo);
    repo.claim = (instanceId, n, leaseMs) => {
      asked.push(n);
      return claim(instanceId, n, leaseMs);
    };
  });
  afterAll(async () => {
    await Promise.all([web?.close(), worker?.close()]);
    await db?.drop();
  });

  /** The claimer's own poll (private: its timer is 10 minutes here). */
  const safetyPoll = (): Promise<void> => {
    const claimer: unknown = worker.get(TaskClaimer);
    return (claimer as { safetyPoll(): Promise<void> }).safetyPoll();
  };

  it('a safety poll over an empty queue runs no claim, so it never holds the free slots', async () => {
    await sleep(200); // the boot-time claim, if still running
    asked.length = 0;
    for (let i = 0; i < 3; i++) await safetyPoll();
    await sleep(100);
    expect(asked).toEqual([]);
    expect(worker.get(TaskClaimer).slots()).toEqual({ busy: 0, free: 8 });
  });

  it('a notice of one queued task claims one slot, not all the free ones', async () => {
    asked.length = 0;
    const tasks = web.get(TasksService);
    const t = (
      await web.get(TaskCreationService).create(legacyTaskInput('o-slots', { principal: PRINCIPAL }))
    ).task;
    expect(t).toMatchObject({ instanceId: null, statusMessage: QUEUED_MESSAGE });
    const run = await exec.run(t.id);
    expect(asked[0]).toBe(1);
    run.complete();
    const w = await tasks.waitForTerminal('o-slots', t.id, { timeoutMs: 5000 });
    expect(w.kind === 'terminal' && w.task.status).toBe('completed');
  });
});
