import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { createTestApp } from '../../test/support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/test-database.js';
import { inTransaction } from '../database/sql-transaction.js';
import { InstancesService } from '../instances/instances.service.js';
import { requestContext } from '../logging/request-context.js';
import { asActor } from './audit-context.js';
import { AuditTrail } from './audit-trail.service.js';

/** The writer: rows commit with the transaction that records them, or not at all. */
describe('AuditTrail (real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let ds: DataSource;
  let audit: AuditTrail;

  beforeAll(async () => {
    db = await createTestDatabase('audit_trail');
    app = await createTestApp(db.url, { JANITOR_ENABLED: 'false' });
    ds = app.get(DataSource);
    audit = app.get(AuditTrail);
    await ds.query('CREATE TABLE audit_probe (id int PRIMARY KEY)');
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });
  beforeEach(async () => {
    await ds.query('DELETE FROM mcp_audit_event');
  });

  const events = () =>
    ds.query<Record<string, unknown>[]>(
      'SELECT kind, actor, principal, task_id, attempt, instance_id, request_id, detail FROM mcp_audit_event ORDER BY id',
    );

  it("writes a task transaction's rows in one statement at its COMMIT, with the request's context", async () => {
    await requestContext.run({ requestId: 'req-1', principalId: 'oidc:alice' }, () =>
      inTransaction(ds, { lockTimeoutMs: 1000 }, async (tx) => {
        await tx.query('INSERT INTO audit_probe VALUES (1)');
        await audit.record(tx, { kind: 'task.created', taskId: 't1', detail: { note: "it's" } });
        await audit.record(tx, { kind: 'task.attempt', taskId: 't1', attempt: 1, actor: 'worker' });
      }),
    );
    expect(await events()).toEqual([
      {
        kind: 'task.created',
        actor: 'owner',
        principal: 'oidc:alice',
        task_id: 't1',
        attempt: null,
        instance_id: app.get(InstancesService).instanceId,
        request_id: 'req-1',
        detail: { note: "it's" },
      },
      expect.objectContaining({ kind: 'task.attempt', actor: 'worker', attempt: 1 }),
    ]);
  });

  it('writes nothing when the transaction rolls back', async () => {
    await expect(
      inTransaction(ds, { lockTimeoutMs: 1000 }, async (tx) => {
        await audit.record(tx, { kind: 'task.created', taskId: 't2' });
        await tx.query('INSERT INTO audit_probe VALUES (1)'); // duplicate key
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect(await events()).toEqual([]);
  });

  it('records an operator as the actor, and on a TypeORM manager in its transaction', async () => {
    await asActor({ kind: 'operator', principal: 'proxy:ops', via: 'cli' }, () =>
      ds.transaction((m) => audit.record(m, { kind: 'api_key.revoked', detail: { keyId: 'k1' } })),
    );
    await audit.recordAlone({
      kind: 'auth.scope_refused',
      principal: 'oidc:bob',
      detail: { missing: ['mcp:x'] },
    });
    expect(await events()).toEqual([
      expect.objectContaining({
        kind: 'api_key.revoked',
        actor: 'operator',
        principal: 'proxy:ops',
        detail: { keyId: 'k1', via: 'cli' },
      }),
      expect.objectContaining({ kind: 'auth.scope_refused', actor: 'system', principal: 'oidc:bob' }),
    ]);
  });
});
