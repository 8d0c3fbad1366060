import type { INestApplication } from '@nestjs/common';
import { createTestApp } from '../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
import { InstancesRepository } from '../instances/instances.repository.js';
import { InstancesService } from '../instances/instances.service.js';
import { waitFor } from '../../test/support/tasks-e2e.js';
import { JanitorService } from './janitor.service.js';

/** Instance ids (uuids) of the rows the first test plants, in the order the rows are listed by id. */
const ID = {
  alive: '00000000-0000-4000-8000-000000000001',
  killed1: '00000000-0000-4000-8000-000000000002',
  killed2: '00000000-0000-4000-8000-000000000003',
  killed3: '00000000-0000-4000-8000-000000000004',
  old1: '00000000-0000-4000-8000-000000000005',
  old2: '00000000-0000-4000-8000-000000000006',
  old3: '00000000-0000-4000-8000-000000000007',
  recent: '00000000-0000-4000-8000-000000000008',
};

interface InstanceRow {
  id: string;
  stopped: boolean;
  stoppedAtLastBeat: boolean;
}

/**
 * Every start registers a service_instance row: the janitor marks the silent ones (killed instances never
 * write stopped_at) stopped as of their last heartbeat, and deletes rows stopped longer than
 * JANITOR_INSTANCE_RETENTION_HOURS, in bounded batches. A process that was only cut off is live again with its
 * next heartbeat, and one whose row was deleted registers again.
 */
describe('the janitor and instance rows', () => {
  let db: TestDatabase;
  let app: INestApplication;

  const rows = (): Promise<InstanceRow[]> =>
    withClient(db.url, async (c) =>
      (
        await c.query<InstanceRow>(
          `SELECT id, stopped_at IS NOT NULL AS stopped, stopped_at = heartbeat_at AS "stoppedAtLastBeat"
             FROM service_instance ORDER BY id`,
        )
      ).rows.map((r) => ({ ...r, stoppedAtLastBeat: r.stoppedAtLastBeat === true })),
    );

  beforeAll(async () => {
    db = await createTestDatabase('janitor_instances');
    app = await createTestApp(db.url, {
      JANITOR_ENABLED: 'false',
      JANITOR_BATCH_SIZE: '2',
      JANITOR_INSTANCE_RETENTION_HOURS: '24',
      INSTANCE_HEARTBEAT_MS: '1000',
    });
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('marks silent instances stopped, prunes old stopped ones in batches, keeps the rest', async () => {
    const self = app.get(InstancesService).instanceId;
    await withClient(db.url, (c) =>
      c.query(
        `INSERT INTO service_instance (id, hostname, pid, version, role, started_at, heartbeat_at, stopped_at)
         SELECT id::uuid, 'h', 1, 'v', 'all', now() - interval '3 days', hb, stopped
         FROM (VALUES
           ('${ID.killed1}', now() - interval '2 hours', NULL::timestamptz),
           ('${ID.killed2}', now() - interval '5 minutes', NULL),
           ('${ID.killed3}', now() - interval '1 minute', NULL),
           ('${ID.alive}', now(), NULL),
           ('${ID.old1}', now() - interval '30 hours', now() - interval '30 hours'),
           ('${ID.old2}', now() - interval '26 hours', now() - interval '25 hours'),
           ('${ID.old3}', now() - interval '48 hours', now() - interval '47 hours'),
           ('${ID.recent}', now() - interval '2 hours', now() - interval '1 hour')
         ) AS v(id, hb, stopped)`,
      ),
    );

    const report = await app.get(JanitorService).runOnce();

    expect(report.result).toBe('ok');
    expect({ lapsed: report.rows.instance_lapsed, pruned: report.rows.instance_pruned }).toEqual({
      lapsed: 3,
      pruned: 3,
    });
    expect(await rows()).toEqual(
      [
        { id: ID.alive, stopped: false, stoppedAtLastBeat: false },
        { id: ID.killed1, stopped: true, stoppedAtLastBeat: true },
        { id: ID.killed2, stopped: true, stoppedAtLastBeat: true },
        { id: ID.killed3, stopped: true, stoppedAtLastBeat: true },
        { id: ID.recent, stopped: true, stoppedAtLastBeat: false },
        { id: self, stopped: false, stoppedAtLastBeat: false },
      ].sort((x, y) => (x.id < y.id ? -1 : 1)),
    );
  });

  it('a process marked lapsed is live again at its next heartbeat; one stopped by its shutdown stays stopped', async () => {
    const repo = app.get(InstancesRepository);
    expect(await repo.heartbeat(ID.killed3)).toBe(true);
    expect(await repo.heartbeat(ID.recent)).toBe(true);
    const after = await rows();
    expect(after.find((r) => r.id === ID.killed3)).toEqual({
      id: ID.killed3,
      stopped: false,
      stoppedAtLastBeat: false,
    });
    expect(after.find((r) => r.id === ID.recent)).toEqual({
      id: ID.recent,
      stopped: true,
      stoppedAtLastBeat: false,
    });
  });

  it('an instance whose row was pruned registers again with its next heartbeat', async () => {
    const self = app.get(InstancesService).instanceId;
    await withClient(db.url, (c) => c.query('DELETE FROM service_instance WHERE id = $1', [self]));
    expect(await app.get(InstancesRepository).heartbeat(self)).toBe(false);
    // The next heartbeat (every second here) finds no row and registers the instance again.
    const back = await waitFor(
      async () => (await rows()).find((r) => r.id === self),
      (r) => r !== undefined,
      { timeoutMs: 10000, intervalMs: 100, what: 'the instance row to be written again' },
    );
    expect(back).toEqual({
      id: self,
      stopped: false,
      stoppedAtLastBeat: false,
    });
  });
});
