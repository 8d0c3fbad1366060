import type { INestApplication } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { newTaskRow } from '../../../test/support/task-registry.js';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../../test/support/test-database.js';
import { QUEUED_MESSAGE } from '../task-queue.js';
import { TaskCreationRepository } from './task-creation.repository.js';
import { TaskQueueRepository } from './task-queue.repository.js';
import { ToolQueueRepository } from './tool-queue.repository.js';

const LIMITS = { maxPerOwner: 1000, maxTotal: 10000, maxRetainedPerOwner: 10000 };

/**
 * What `queue status`, the console and the queue gauges count, on real PostgreSQL: they count as the claim
 * does. A run whose lease lapsed (its instance died) is not running, and no limit counts it; a task past its
 * expiry is not waiting, since no claim will ever start it.
 */
describe('queue status counts as the claim does (real PostgreSQL)', () => {
  let db: TestDatabase;
  let web: INestApplication;

  beforeEach(async () => {
    db = await createTestDatabase('tool_queue_status');
    web = await createTestApp(db.url, { JANITOR_ENABLED: 'false', INSTANCE_ROLE: 'web' });
  });
  afterEach(async () => {
    await web?.close();
    await db?.drop();
  });

  /** One task of `tool` (default `slow`), share `k`: queued (instance null) or leased to `instance`. */
  const task = async (
    instance: string | null,
    tool = 'slow',
    limitKey: string | null = null,
  ): Promise<string> => {
    const row = {
      ...newTaskRow(randomUUID(), 'owner-k'),
      toolName: tool,
      fairnessKey: 'k',
      instanceId: instance,
      limitKey,
    };
    const t = await web
      .get(TaskCreationRepository)
      .insertWithLimits(instance === null ? { ...row, statusMessage: QUEUED_MESSAGE } : row, LIMITS);
    return t.id;
  };
  const sql = (text: string, params: unknown[]): Promise<unknown> =>
    withClient(db.url, (c) => c.query(text, params));

  it('a lapsed lease waits for recovery and an expired task is neither running nor waiting', async () => {
    const dead = randomUUID();
    await task(randomUUID()); // running, lease held
    const lapsed = await task(dead);
    await task(null); // claimable
    const expired = await task(null);
    await sql(`UPDATE task SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [lapsed]);
    await sql(`UPDATE task SET expires_at = now() - interval '1 second' WHERE id = $1`, [expired]);

    const status = await web.get(ToolQueueRepository).status();
    expect(status.tools).toEqual([
      {
        tool: 'slow',
        paused: false,
        running: 1,
        waiting: { paused: 0, limit: 0, claimable: 1, delayed: 0, lapsed: 1 },
      },
    ]);
    expect(status.keys).toEqual([{ key: 'k', running: 1, waiting: 2, claimable: 1 }]);

    const gauges = await web.get(ToolQueueRepository).gauges();
    expect(gauges.waiting).toEqual([{ tool: 'slow', reason: 'no_slot', n: 1 }]);
    expect(gauges.running).toEqual([]); // 'slow' declares no limit: its runs have no limit key
    const depth = await web.get(TaskQueueRepository).depth();
    expect(depth).toMatchObject({ ready: 1, delayed: 0 });

    // And the claim agrees: of the two queued, only the live one starts.
    const claimed = await web.get(TaskQueueRepository).claim(randomUUID(), 5, 30000);
    expect(claimed.map((c) => c.task.id)).not.toContain(expired);
    expect(claimed).toHaveLength(1);
  });

  it("reads each limit's use in one snapshot: runs by limit key (lapsed leases left out), starts in the rate interval", async () => {
    const dead = randomUUID();
    await task(randomUUID(), 'erp', 'acme');
    await task(randomUUID(), 'erp', 'acme');
    await task(randomUUID(), 'erp', 'globex');
    const lapsed = await task(dead, 'erp', 'initech');
    await sql(`UPDATE task SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [lapsed]);
    await sql(
      `INSERT INTO tool_run_start (tool_name, started_at)
       VALUES ('erp', now()), ('erp', now() - interval '10 seconds'), ('erp', now() - interval '2 minutes'),
              ('other', now())`,
      [],
    );

    const gauges = await web.get(ToolQueueRepository).gauges([
      { tool: 'erp', intervalMs: 60_000 },
      { tool: 'quiet', intervalMs: 1000 },
    ]);
    expect([...gauges.running].sort((a, b) => a.key.localeCompare(b.key))).toEqual([
      { tool: 'erp', key: 'acme', n: 2 },
      { tool: 'erp', key: 'globex', n: 1 },
    ]);
    expect(gauges.started).toEqual([
      { tool: 'erp', n: 2 },
      { tool: 'quiet', n: 0 },
    ]);
  });
});
