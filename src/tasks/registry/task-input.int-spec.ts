import { legacyTaskInput } from '../../../test/support/task-registry.js';
import type { INestApplication } from '@nestjs/common';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.js';
import { ControlledExecutor, waitFor } from '../../../test/support/controlled-executor.js';
import { InstancesService } from '../../instances/instances.service.js';
import { TasksRepository } from '../store/tasks.repository.js';
import { TaskOutcomesRepository } from '../store/task-outcomes.repository.js';
import { TaskWorkerRepository } from '../store/task-worker.repository.js';
import { TasksService } from './tasks.service.js';
import { TaskCreationService } from '../execution/task-creation.service.js';

/** Input asked for while a task runs (parking, answers, resumes), on real PostgreSQL, one instance. */
describe('task input while running on real PostgreSQL (one instance)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let tasks: TasksService;
  let repo: TasksRepository;
  let outcomes: TaskOutcomesRepository;
  let worker: TaskWorkerRepository;
  let exec: ControlledExecutor;
  let me: string;

  const input = legacyTaskInput;

  beforeAll(async () => {
    db = await createTestDatabase('task_input');
    exec = new ControlledExecutor();
    app = await createTestApp(db.url, { JANITOR_ENABLED: 'false' }, [], { taskWork: exec });
    tasks = app.get(TasksService);
    repo = app.get(TasksRepository);
    outcomes = app.get(TaskOutcomesRepository);
    worker = app.get(TaskWorkerRepository);
    me = app.get(InstancesService).instanceId;
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  const ask = (message: string) => ({
    method: 'elicitation/create',
    params: { message, requestedSchema: {} },
  });

  it('parks with minted keys, merges partial answers, ignores unknown ones, and resumes with every answer', async () => {
    const owner = 'owner-input';
    const t = (await app.get(TaskCreationService).create(input(owner, { era: 'modern', sessionId: null })))
      .task;
    const first = await exec.run(t.id, 0);
    expect(first.ctx.answers).toEqual({});
    expect(first.ctx.inputRound).toBe(0);
    first.park({ name: ask('Name?'), color: ask('Color?') }, { step: 1 });
    const parked = await waitFor(async () => {
      const cur = await tasks.get(owner, t.id);
      return cur.status === 'input_required' ? cur : undefined;
    });
    expect(parked.inputRequests).toEqual({ 'r1.name': ask('Name?'), 'r1.color': ask('Color?') });
    expect(parked).toMatchObject({
      inputRounds: 1,
      instanceId: null,
      leaseExpiresAt: null,
      handlerState: { step: 1 },
    });

    const partial = await tasks.submitInput(owner, t.id, {
      'r1.name': { action: 'accept', content: { v: 'Ada' } },
      bogus: 1,
    });
    expect(partial).toMatchObject({ accepted: ['r1.name'], ignored: ['bogus'], resumed: false });
    expect(partial.task.status).toBe('input_required');
    expect(Object.keys(partial.task.inputRequests)).toEqual(['r1.color']);
    const dup = await tasks.submitInput(owner, t.id, {
      'r1.name': { action: 'accept', content: { v: 'Eve' } },
    });
    expect(dup).toMatchObject({ accepted: [], ignored: ['r1.name'], resumed: false });

    const last = await tasks.submitInput(owner, t.id, {
      'r1.color': { action: 'accept', content: { v: 'red' } },
    });
    expect(last.resumed).toBe(true);
    expect(last.task).toMatchObject({
      status: 'working',
      generation: parked.generation + 1,
      instanceId: me,
    });
    const second = await exec.run(t.id, 1);
    expect(second.ctx.handlerState).toEqual({ step: 1 });
    expect(second.ctx.inputRound).toBe(1);
    expect(second.ctx.answers).toEqual({
      'r1.name': { action: 'accept', content: { v: 'Ada' } },
      'r1.color': { action: 'accept', content: { v: 'red' } },
    });
    // A second round with the same local key gets a new wire key.
    second.park({ name: ask('Name again?') }, { step: 2 });
    const parked2 = await waitFor(async () => {
      const cur = await tasks.get(owner, t.id);
      return cur.status === 'input_required' ? cur : undefined;
    });
    expect(Object.keys(parked2.inputRequests)).toEqual(['r2.name']);
    // The old worker's generation can no longer write.
    expect(
      (await outcomes.completeIfCurrent({ taskId: t.id, generation: parked.generation, instanceId: me }, {}))
        .applied,
    ).toBe(false);
    await tasks.submitInput(owner, t.id, { 'r2.name': { action: 'decline' } });
    const third = await exec.run(t.id, 2);
    expect(Object.keys(third.ctx.answers).sort()).toEqual(['r1.color', 'r1.name', 'r2.name']);
    third.complete({ content: [{ type: 'text', text: 'bye' }] });
    const r = await tasks.waitForTerminal(owner, t.id, { timeoutMs: 5000 });
    expect(r.kind === 'terminal' && r.task.status).toBe('completed');
  });

  it('cancels a parked task and ignores answers that arrive afterwards', async () => {
    const owner = 'owner-input-cancel';
    const t = (await app.get(TaskCreationService).create(input(owner, { era: 'modern', sessionId: null })))
      .task;
    (await exec.run(t.id)).park({ ok: ask('OK?') });
    await waitFor(async () =>
      (await tasks.get(owner, t.id)).status === 'input_required' ? true : undefined,
    );
    expect((await tasks.cancel(owner, t.id)).status).toBe('cancelled');
    const late = await tasks.submitInput(owner, t.id, { 'r1.ok': { action: 'accept' } });
    expect(late).toMatchObject({ accepted: [], resumed: false });
    expect(late.task.status).toBe('cancelled');
    expect(exec.runs.filter((r) => r.task.id === t.id)).toHaveLength(1);
  });

  it('fails the task with a clear error when a round breaks a limit', async () => {
    const owner = 'owner-input-limits';
    const tooMany = (await app.get(TaskCreationService).create(input(owner))).task;
    const keys = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, ask(`q${i}`)]));
    (await exec.run(tooMany.id)).park(keys);
    const r1 = await tasks.waitForTerminal(owner, tooMany.id, { timeoutMs: 5000 });
    expect(r1.kind === 'terminal' && r1.task).toMatchObject({
      status: 'failed',
      error: { code: -32603, message: expect.stringContaining('TASK_MAX_INPUT_KEYS (50)') },
    });

    const bigState = (await app.get(TaskCreationService).create(input(owner))).task;
    (await exec.run(bigState.id)).park({ a: ask('a') }, { blob: 'x'.repeat(70000) });
    const r2 = await tasks.waitForTerminal(owner, bigState.id, { timeoutMs: 5000 });
    expect(r2.kind === 'terminal' && r2.task.statusMessage).toContain('TASK_MAX_HANDLER_STATE_BYTES (65536)');

    // Rounds, through the repository with a small limit.
    const t = (await app.get(TaskCreationService).create(input(owner), { placement: 'here' })).task;
    const limits = { maxRounds: 2, maxKeys: 5, maxStateBytes: 1000 };
    let fence = { taskId: t.id, generation: t.generation, instanceId: me };
    for (let round = 1; round <= 2; round++) {
      const parked = await worker.parkForInput(fence, { q: ask('?') }, null, limits);
      expect(parked).toMatchObject({ applied: true, limitBroken: null });
      const merged = await repo.mergeInputResponses(
        owner,
        t.id,
        { [`r${round}.q`]: { action: 'accept' } },
        {
          instanceId: me,
          leaseMs: 30000,
        },
      );
      expect(merged?.resumed).toBe(true);
      fence = { ...fence, generation: merged!.task.generation };
    }
    const third = await worker.parkForInput(fence, { q: ask('?') }, null, limits);
    expect(third.applied && third.limitBroken).toContain('TASK_MAX_INPUT_ROUNDS (2)');
    expect((await tasks.get(owner, t.id)).status).toBe('failed');
  });
});
