import type { INestApplication } from '@nestjs/common';
import { asActor } from '../audit/audit-context.js';
import { InstancesService } from '../instances/instances.service.js';
import { requestContext } from '../logging/request-context.js';
import { ANONYMOUS_PRINCIPAL, type Principal } from '../principals/principal.js';
import { QuotaExceededError } from '../quotas/quota.errors.js';
import { createTestApp } from '../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
import { SessionsService } from './sessions.service.js';

interface Row {
  kind: string;
  actor: string;
  principal: string | null;
  session_id: string;
  era: string | null;
  instance_id: string | null;
  request_id: string | null;
  detail: Record<string, unknown> | null;
}

/** session.opened and session.ended rows, written with the session row they record (real PostgreSQL). */
describe('session audit rows (real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let sessions: SessionsService;
  let instanceId: string;
  const carol: Principal = {
    ...ANONYMOUS_PRINCIPAL,
    id: 'proxy:carol',
    provider: 'proxy',
    subject: 'carol',
  };

  beforeAll(async () => {
    db = await createTestDatabase('sessions_audit');
    app = await createTestApp(db.url, {
      SESSION_IDLE_TTL_MS: '60000',
      QUOTA_SESSIONS_PER_PRINCIPAL: '3',
      JANITOR_ENABLED: 'false',
    });
    sessions = app.get(SessionsService);
    instanceId = app.get(InstancesService).instanceId;
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });
  beforeEach(async () => {
    await withClient(db.url, (c) => c.query('DELETE FROM mcp_audit_event; DELETE FROM mcp_session'));
  });

  const rows = (sessionId?: string): Promise<Row[]> =>
    withClient(db.url, async (c) => {
      const r = await c.query<Row>(
        `SELECT kind, actor, principal, session_id, era, instance_id, request_id, detail
           FROM mcp_audit_event WHERE $1::text IS NULL OR session_id = $1 ORDER BY id`,
        [sessionId ?? null],
      );
      return r.rows;
    });

  /** As a request of `principal` (the gateway sets this context for every request). */
  const asRequest = <T>(principal: Principal, requestId: string, fn: () => Promise<T>): Promise<T> =>
    requestContext.run({ requestId, principalId: principal.id }, fn);

  it('records the opening (owner, client, protocol) and the client DELETE, each once', async () => {
    const s = await asRequest(carol, 'req-open', () =>
      sessions.open(carol, '2025-11-25', {}, { name: 'probe-client', version: '1' }),
    );
    await asRequest(carol, 'req-delete', () => sessions.end(s, 'client'));
    // A second DELETE of the same session ends nothing, so it records nothing.
    await asRequest(carol, 'req-delete-2', () => sessions.end(s, 'client'));
    expect(await rows(s.id)).toEqual([
      {
        kind: 'session.opened',
        actor: 'owner',
        principal: 'proxy:carol',
        session_id: s.id,
        era: 'legacy',
        instance_id: instanceId,
        request_id: 'req-open',
        detail: { protocolVersion: '2025-11-25', clientName: 'probe-client' },
      },
      {
        kind: 'session.ended',
        actor: 'owner',
        principal: 'proxy:carol',
        session_id: s.id,
        era: 'legacy',
        instance_id: instanceId,
        request_id: 'req-delete',
        detail: { reason: 'client' },
      },
    ]);
  });

  it('records nothing for a session the quota refused', async () => {
    for (let i = 0; i < 3; i++)
      await asRequest(carol, `r${i}`, () => sessions.open(carol, '2025-11-25', {}, null));
    await expect(
      asRequest(carol, 'r-over', () => sessions.open(carol, '2025-11-25', {}, null)),
    ).rejects.toBeInstanceOf(QuotaExceededError);
    const opened = (await rows()).filter((r) => r.kind === 'session.opened');
    expect(opened).toHaveLength(3);
    expect(opened.map((r) => r.request_id)).toEqual(['r0', 'r1', 'r2']);
  });

  it('records each session the idle sweep ends: the system acted, the owner is the principal', async () => {
    const idle = await Promise.all(
      ['a', 'b'].map((n) =>
        asRequest(carol, `open-${n}`, () => sessions.open(carol, '2025-11-25', {}, null)),
      ),
    );
    const fresh = await asRequest(carol, 'open-c', () => sessions.open(carol, '2025-11-25', {}, null));
    await withClient(db.url, (c) =>
      c.query(`UPDATE mcp_session SET last_seen_at = now() - interval '2 minutes' WHERE id = ANY($1)`, [
        idle.map((s) => s.id),
      ]),
    );
    await sessions.sweep();
    const ended = (await rows()).filter((r) => r.kind === 'session.ended');
    // Both sides in code-unit order: localeCompare on one and sort() on the other disagreed whenever the
    // two random ids differed in case at their first letter.
    expect(ended.sort((x, y) => (x.session_id < y.session_id ? -1 : 1))).toEqual(
      idle
        .map((s) => s.id)
        .sort()
        .map((id) => ({
          kind: 'session.ended',
          actor: 'system',
          principal: 'proxy:carol',
          session_id: id,
          era: 'legacy',
          instance_id: instanceId,
          request_id: null,
          detail: { reason: 'idle' },
        })),
    );
    expect((await rows(fresh.id)).map((r) => r.kind)).toEqual(['session.opened']);
  });

  it('records an operator ending a session under the operator, with the owner in detail', async () => {
    const s = await asRequest(carol, 'open-op', () => sessions.open(carol, '2025-11-25', {}, null));
    await asActor({ kind: 'operator', principal: 'ops:dave', via: 'console' }, () =>
      sessions.end(s, 'operator'),
    );
    expect((await rows(s.id))[1]).toEqual({
      kind: 'session.ended',
      actor: 'operator',
      principal: 'ops:dave',
      session_id: s.id,
      era: 'legacy',
      instance_id: instanceId,
      request_id: null,
      detail: { owner: 'proxy:carol', reason: 'operator', via: 'console' },
    });
  });
});
