import type { INestApplication } from '@nestjs/common';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import { newTaskRow, usageAgainstRows } from '../../../test/support/task-registry.js';
import { ControlledExecutor } from '../../../test/support/controlled-executor.js';
import { InstancesService } from '../../instances/instances.service.js';
import { JanitorService } from '../../janitor/janitor.service.js';
import type { CreationLimits } from './creation-limits.js';
import { TaskCreationRepository, type NewTask } from './task-creation.repository.js';
import { TasksRepository } from './tasks.repository.js';
import { TaskErrorCode } from '../tasks.errors.js';
import { TaskCreationService } from '../execution/task-creation.service.js';

const ROOMY: CreationLimits = { maxPerOwner: 1000, maxTotal: 1000, maxRetainedPerOwner: 1000 };

/**
 * Creations named by an Idempotency-Key (issue 22, item 8) against real PostgreSQL: the unique index
 * task_owner_idempotency_idx is the only arbiter, the creation limits still hold, and a key lives exactly as
 * long as its task.
 */
describe('Idempotency-Key creations (real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let creations: TaskCreationRepository;
  let me: string;

  const keyed = (owner: string, key: string, hash: string, ttlMs = 60_000): NewTask => ({
    ...newTaskRow(me, owner, ttlMs),
    idempotencyKey: key,
    requestHash: hash,
  });
  const rowsOf = (owner: string): Promise<{ id: string; idempotency_key: string | null }[]> =>
    withClient(db.url, async (c) => {
      const r = await c.query<{ id: string; idempotency_key: string | null }>(
        'SELECT id, idempotency_key FROM task WHERE owner_id = $1',
        [owner],
      );
      return r.rows;
    });

  beforeAll(async () => {
    db = await createTestDatabase('task_idem');
    app = await createTestApp(db.url, { JANITOR_ENABLED: 'false', TASK_EXPIRED_GRACE_MS: '0' }, [], {
      taskWork: new ControlledExecutor(),
    });
    creations = app.get(TaskCreationRepository);
    me = app.get(InstancesService).instanceId;
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('20 parallel creations with one key: one row, every caller gets it, one of them created it', async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, () => creations.insertKeyed(keyed('o-par', 'k', 'h1'), ROOMY)),
    );
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.task.id)).size).toBe(1);
    expect(results.every((r) => r.requestHash === 'h1')).toBe(true);
    expect(await rowsOf('o-par')).toEqual([{ id: results[0].task.id, idempotency_key: 'k' }]);
    // Another owner's same key is another task.
    const other = await creations.insertKeyed(keyed('o-par-2', 'k', 'h1'), ROOMY);
    expect(other.created).toBe(true);
    expect(other.task.id).not.toBe(results[0].task.id);
    const usage = await usageAgainstRows(db.url);
    expect(usage.counters).toEqual(usage.rows);
  });

  it('the creation limits hold for keyed creations, and a refused creation leaves its key free', async () => {
    const limits = { ...ROOMY, maxPerOwner: 3 };
    // Six distinct keys at once against a limit of 3 live tasks: exactly 3 land.
    const settled = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) => creations.insertKeyed(keyed('o-lim', `k${i}`, 'h'), limits)),
    );
    const refused = settled.filter((s) => s.status === 'rejected');
    expect(settled.filter((s) => s.status === 'fulfilled')).toHaveLength(3);
    for (const r of refused) {
      expect(r.reason).toMatchObject({ code: TaskErrorCode.LIMIT_EXCEEDED });
    }
    const taken = new Set((await rowsOf('o-lim')).map((r) => r.idempotency_key));
    const free = [0, 1, 2, 3, 4, 5].map((i) => `k${i}`).find((k) => !taken.has(k))!;
    const later = await creations.insertKeyed(keyed('o-lim', free, 'h'), { ...limits, maxPerOwner: 4 });
    expect(later.created).toBe(true);
  });

  it('TaskCreationService.create with a key: a repeat gets the task, other arguments are IDEMPOTENCY_CONFLICT naming the key', async () => {
    const creation = app.get(TaskCreationService);
    const input = {
      ownerId: 'o-svc',
      era: 'modern' as const,
      toolName: 't',
      requestParams: { name: 't', arguments: { a: 1 } },
    };
    const key = { idempotencyKey: 'order-42', requestHash: 'hash-a' };
    const first = await creation.create(input, { key, placement: 'queue' });
    const again = await creation.create(input, { key, placement: 'queue' });
    expect(again).toEqual({
      task: expect.objectContaining({ id: first.task.id }),
      created: false,
      here: false,
    });
    // Leased here by the call that created it; a repeat of the key leased nothing here.
    const hereKey = { idempotencyKey: 'order-43', requestHash: 'hash-a' };
    expect(await creation.create(input, { key: hereKey, placement: 'here' })).toMatchObject({
      created: true,
      here: true,
    });
    expect(await creation.create(input, { key: hereKey, placement: 'here' })).toMatchObject({
      created: false,
      here: false,
    });
    await expect(creation.create(input, { key: { ...key, requestHash: 'hash-b' } })).rejects.toMatchObject({
      code: TaskErrorCode.IDEMPOTENCY_CONFLICT,
      idempotencyKey: 'order-42',
      message: expect.stringContaining("Idempotency-Key 'order-42'"),
    });
  });

  it('a key lives as long as its task: once the janitor deleted it, the key names a new call', async () => {
    const first = await creations.insertKeyed(keyed('o-life', 'kept', 'h1', 1), ROOMY);
    await app.get(TasksRepository).cancelIfLive('o-life', first.task.id, 'done with it');
    // While the task exists, the key still names it (whatever the new call's hash).
    expect(await creations.insertKeyed(keyed('o-life', 'kept', 'h2'), ROOMY)).toMatchObject({
      created: false,
      requestHash: 'h1',
      task: { id: first.task.id },
    });
    await new Promise((r) => setTimeout(r, 20)); // past created + ttl (1 ms), grace 0
    await app.get(JanitorService).runOnce();
    expect(await rowsOf('o-life')).toEqual([]);
    const fresh = await creations.insertKeyed(keyed('o-life', 'kept', 'h2'), ROOMY);
    expect(fresh).toMatchObject({ created: true, requestHash: 'h2' });
    expect(fresh.task.id).not.toBe(first.task.id);
  });
});
