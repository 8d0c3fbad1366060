import type { INestApplication } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { newTaskRow } from '../../../test/support/task-registry.js';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import { TaskCreationRepository } from '../store/task-creation.repository.js';
import { TaskQueueRepository } from '../store/task-queue.repository.js';
import { QUEUED_MESSAGE } from '../task-queue.js';

const LIMITS = { maxPerOwner: 1000, maxTotal: 10000, maxRetainedPerOwner: 10000 };

/**
 * The fair claim (TaskQueueRepository.claim) on real PostgreSQL, driven directly: which tasks a claim takes
 * given what runs and what waits, and that claims on two instances at once never read a stale count.
 */
describe('fair claim of queued work (real PostgreSQL)', () => {
  let db: TestDatabase;
  /** Two web instances: their claimers never run, so only the test's own claims take rows. */
  let web1: INestApplication;
  let web2: INestApplication;

  beforeEach(async () => {
    db = await createTestDatabase('task_fair_claim');
    const env = { JANITOR_ENABLED: 'false', INSTANCE_ROLE: 'web' };
    [web1, web2] = await Promise.all([createTestApp(db.url, env), createTestApp(db.url, env)]);
  });
  afterEach(async () => {
    await Promise.all([web1?.close(), web2?.close()]);
    await db?.drop();
  });

  /** `n` tasks of `key`'s share: queued, or running on `instance`; one after the other (oldest first). */
  const tasks = async (key: string, n: number, instance: string | null = null): Promise<string[]> => {
    const creations = web1.get(TaskCreationRepository);
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const row = { ...newTaskRow(randomUUID(), `owner-${key}`), fairnessKey: key, instanceId: instance };
      const t = await creations.insertWithLimits(
        instance === null ? { ...row, statusMessage: QUEUED_MESSAGE } : row,
        LIMITS,
      );
      ids.push(t.id);
    }
    return ids;
  };

  const runningByKey = (): Promise<Record<string, number>> =>
    withClient(db.url, async (c) => {
      const { rows } = await c.query<{ k: string; n: number }>(
        `SELECT fairness_key AS k, count(*)::int AS n FROM task
          WHERE status = 'working' AND instance_id IS NOT NULL GROUP BY 1`,
      );
      return Object.fromEntries(rows.map((r) => [r.k, r.n]));
    });

  it('gives slots to the key with the fewest running, each pick counting, ties to the oldest', async () => {
    const elsewhere = randomUUID();
    const a = await tasks('a', 4);
    const b = await tasks('b', 4);
    const c = await tasks('c', 2);
    await tasks('a', 2, elsewhere);
    await tasks('c', 1, elsewhere);
    // Running a 2, b 0, c 1. Levels (running + place in line): a 3,4…; b 1,2,3…; c 2,3. The five lowest,
    // oldest first among equals: b1; b2 and c1; a1 and b3 (a1 is the oldest of level 3, then b3, then c2).
    const claimed = await web1.get(TaskQueueRepository).claim(randomUUID(), 5, 30000);
    expect(new Set(claimed.map((t) => t.task.id))).toEqual(new Set([b[0], b[1], c[0], a[0], b[2]]));
  });

  it('does not count runs that ended here while their outcome is written', async () => {
    const elsewhere = randomUUID();
    const p = await tasks('p', 1);
    const q = await tasks('q', 1);
    await tasks('p', 1, elsewhere);
    const [qRun] = await tasks('q', 1, elsewhere);
    const repo = web1.get(TaskQueueRepository);
    // p and q run one each: a tie, which p's older task wins. Once q's run has returned (its outcome still
    // being written), q runs none, and its task goes first.
    const [first] = await repo.claim(randomUUID(), 1, 30000, undefined, [qRun]);
    expect(first.task.id).toBe(q[0]);
    const [second] = await repo.claim(randomUUID(), 1, 30000);
    expect(second.task.id).toBe(p[0]);
  });

  it('is first come, first served when every task shares one key (TASK_FAIR_SHARE=off)', async () => {
    const elsewhere = randomUUID();
    const first = await tasks('', 3);
    await tasks('', 5, elsewhere);
    const claimed = await web1.get(TaskQueueRepository).claim(randomUUID(), 2, 30000);
    expect(claimed.map((t) => t.task.id).sort()).toEqual(first.slice(0, 2).sort());
  });

  it('two instances claiming at once never let one key take a share twice', async () => {
    const x = await tasks('x', 6);
    const y = await tasks('y', 6);
    const repos = [web1.get(TaskQueueRepository), web2.get(TaskQueueRepository)];
    for (let round = 1; round <= 4; round++) {
      // Both read the running counts at the same moment unless the claim lock orders them: then both would
      // take x's oldest task (x wins the tie), and one of them would come back empty.
      const got = await Promise.all(repos.map((r) => r.claim(randomUUID(), 1, 30000)));
      expect(got.map((g) => g.length)).toEqual([1, 1]);
      expect(await runningByKey()).toEqual({ x: round, y: round });
    }
    expect(x.length + y.length).toBe(12);
  });

  it('starts at most `starts` runs of a rate-limited tool per interval, holding the rest until the window frees', async () => {
    const creations = web1.get(TaskCreationRepository);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const row = {
        ...newTaskRow(randomUUID(), 'owner-rated'),
        toolName: 'rated',
        limitKey: '',
        instanceId: null,
      };
      ids.push((await creations.insertWithLimits({ ...row, statusMessage: QUEUED_MESSAGE }, LIMITS)).id);
    }
    const limits = (tool: string) =>
      tool === 'rated' ? { rate: { starts: 2, intervalMs: 1500 } } : undefined;
    const repo = web1.get(TaskQueueRepository);
    const first = await repo.claim(randomUUID(), 5, 30000, limits);
    expect(first).toHaveLength(2);
    const held = await withClient(db.url, (c) =>
      c.query<{ status_message: string; wait_ms: number }>(
        `SELECT status_message, extract(epoch FROM available_at - now()) * 1000 AS wait_ms FROM task
          WHERE tool_name = 'rated' AND instance_id IS NULL`,
      ),
    );
    expect(held.rows).toHaveLength(3);
    for (const r of held.rows) {
      expect(r.status_message).toBe('Queued: waiting for the limit of 2 starts of rated per 1500 ms');
      // Held until the first start leaves the window, about 1.5 s from now.
      expect(Number(r.wait_ms)).toBeGreaterThan(1000);
      expect(Number(r.wait_ms)).toBeLessThanOrEqual(1500);
    }
    expect(await repo.claim(randomUUID(), 5, 30000, limits)).toHaveLength(0);
    await new Promise((r) => setTimeout(r, 1600));
    const second = await repo.claim(randomUUID(), 5, 30000, limits);
    expect(second).toHaveLength(2);
    expect([...first, ...second].every((c) => ids.includes(c.task.id))).toBe(true);
  });
});
