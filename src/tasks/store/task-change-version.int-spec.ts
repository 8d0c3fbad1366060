import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { createTestApp } from '../../../test/support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.js';
import { InstancesService } from '../../instances/instances.service.js';
import { ANONYMOUS_PRINCIPAL } from '../../principals/principal.js';
import { SessionsService } from '../../sessions/sessions.service.js';
import { SseEventsRepository } from '../../sessions/sse-events.repository.js';
import { TaskWorkerRepository } from './task-worker.repository.js';
import { TaskChangePublisher } from './task-change-publisher.js';
import { TasksService } from '../registry/tasks.service.js';
import { TaskCreationService } from '../execution/task-creation.service.js';

/**
 * What listeners catch up from (issue #9, defect 3): the change version of a task row, and the handshake
 * era's status notification written in the same transaction as the change.
 */
describe('task change versions and the status-notification outbox (real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let tasks: TasksService;
  let worker: TaskWorkerRepository;
  let events: SseEventsRepository;

  beforeAll(async () => {
    db = await createTestDatabase('task_versions');
    app = await createTestApp(db.url, { JANITOR_ENABLED: 'false' });
    tasks = app.get(TasksService);
    worker = app.get(TaskWorkerRepository);
    events = app.get(SseEventsRepository);
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  const version = async (owner: string, id: string) => (await tasks.versioned(owner, [id]))[0].version;

  it('bumps the version on every visible change and not on lease renewals', async () => {
    const t = (
      await app
        .get(TaskCreationService)
        .create({ ownerId: 'o1', era: 'modern', toolName: 't', requestParams: {} }, { placement: 'here' })
    ).task;
    const v0 = await version('o1', t.id);
    await worker.renewLeases(app.get(InstancesService).instanceId, [t.id], 30000);
    expect(await version('o1', t.id)).toBe(v0);
    await tasks.cancel('o1', t.id);
    const v1 = await version('o1', t.id);
    expect(v1).toBe(v0 + 1);
    // Another owner sees nothing, like every other read.
    expect(await tasks.versioned('o2', [t.id])).toEqual([]);
  });

  it('logs the legacy status notification with the change, and not when the change rolls back', async () => {
    // A real session: the outbox logs nothing for a session whose row is gone (nobody could resume it).
    const session = (await app.get(SessionsService).open(ANONYMOUS_PRINCIPAL, '2025-11-25', {}, null)).id;
    // Its GET stream, primed: before a stream has issued an id the outbox logs nothing (no one could get it).
    const primed = await events.append(session, 'g', null);
    const t = (
      await app.get(TaskCreationService).create(
        {
          ownerId: 'o1',
          sessionId: session,
          era: 'legacy',
          toolName: 't',
          requestParams: {},
        },
        { placement: 'here' },
      )
    ).task;
    await tasks.cancel('o1', t.id);
    const logged = await events.readAfter(session, 'g', primed);
    expect(logged.map((e) => (e.payload as { params: { status: string } }).params.status)).toEqual([
      'working',
      'cancelled',
    ]);
    // A change whose transaction fails after the write leaves neither the change nor its notification.
    const other = (
      await app.get(TaskCreationService).create(
        {
          ownerId: 'o1',
          sessionId: session,
          era: 'legacy',
          toolName: 't',
          requestParams: {},
        },
        { placement: 'here' },
      )
    ).task;
    app.get(TaskChangePublisher).addChangeHook(async (_tx, task) => {
      if (task.id === other.id && task.status === 'cancelled') throw new Error('commit refused');
    });
    await expect(tasks.cancel('o1', other.id)).rejects.toThrow('commit refused');
    expect((await tasks.get('o1', other.id)).status).toBe('working');
    const after = await events.readAfter(session, 'g', logged[logged.length - 1].seq);
    expect(after.map((e) => (e.payload as { params: { status: string } }).params.status)).toEqual([
      'working',
    ]);
    const rows = await app
      .get(DataSource)
      .query<{ n: string }[]>(`SELECT count(*) AS n FROM mcp_sse_event WHERE session_id = $1`, [session]);
    expect(Number(rows[0].n)).toBe(4); // the priming event and three changes
  });
});
