import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { asActor } from '../audit/audit-context.js';
import { AuditTrail } from '../audit/audit-trail.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { McpTool } from '../tool-dispatch/index.js';
import { modernCall } from '../../test/support/mcp-http.js';
import { waitFor } from '../../test/support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
import { ApiKeyInputError, ApiKeysService } from './api-keys.service.js';
import { PROXY_SECRET_HEADER } from './strategies/proxy.strategy.js';

@Injectable()
class GuardedProbe {
  @McpTool({
    name: 'audit_guarded',
    description: 'Needs probe:write.',
    input: { type: 'object' },
    scopes: ['probe:write'],
  })
  guarded(): string {
    return 'ok';
  }
}

@Module({ providers: [GuardedProbe] })
class GuardedProbeModule {}

const PROXY_SECRET = 'audit-proxy-secret-0123456789abcdef';

interface Row {
  kind: string;
  actor: string;
  principal: string | null;
  tool: string | null;
  era: string | null;
  request_id: string | null;
  detail: Record<string, unknown> | null;
}

/**
 * API key rows (written with the key row) and scope refusals (written on their own, never awaited by the
 * request), against real PostgreSQL and over real HTTP.
 */
describe('principal audit rows: API keys and scope refusals (real PostgreSQL, real HTTP)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;
  let keys: ApiKeysService;

  beforeAll(async () => {
    db = await createTestDatabase('principals_audit');
    app = await createTestApp(
      db.url,
      {
        AUTH_PROVIDERS: 'proxy,apikey',
        AUTH_PROXY_SECRET: PROXY_SECRET,
        AUTH_PROXY_SCOPES: 'tasks:read',
        AUTH_REQUIRED_SCOPES: 'tasks:read',
        JANITOR_ENABLED: 'false',
      },
      [GuardedProbeModule],
    );
    url = await loopbackUrl(app, '/mcp');
    keys = app.get(ApiKeysService);
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });
  beforeEach(async () => {
    await withClient(db.url, (c) => c.query('DELETE FROM mcp_audit_event'));
  });

  const rows = (kind: string): Promise<Row[]> =>
    withClient(db.url, async (c) => {
      const r = await c.query<Row>(
        `SELECT kind, actor, principal, tool, era, request_id, detail FROM mcp_audit_event
          WHERE kind = $1 ORDER BY id`,
        [kind],
      );
      return r.rows;
    });

  it('records a key created and revoked by an operator: id, name, scopes, never the secret', async () => {
    const created = await asActor({ kind: 'operator', principal: 'ops:erin', via: 'cli' }, () =>
      keys.create('billing-bot', ['tasks:read', 'tasks:write']),
    );
    await asActor({ kind: 'operator', principal: 'ops:erin', via: 'cli' }, () => keys.revoke(created.id));
    // Revoked already: nothing changes, nothing is recorded.
    await asActor({ kind: 'operator', principal: 'ops:erin', via: 'cli' }, () => keys.revoke(created.id));
    const detail = {
      keyId: created.id,
      name: 'billing-bot',
      scopes: ['tasks:read', 'tasks:write'],
      keyPrincipal: `apikey:${created.id}`,
      via: 'cli',
    };
    const base = { actor: 'operator', principal: 'ops:erin', tool: null, era: null, request_id: null };
    expect(await rows('api_key.created')).toEqual([{ kind: 'api_key.created', ...base, detail }]);
    expect(await rows('api_key.revoked')).toEqual([{ kind: 'api_key.revoked', ...base, detail }]);
    const everything = await withClient(db.url, (c) => c.query('SELECT * FROM mcp_audit_event'));
    const text = JSON.stringify(everything.rows);
    expect(text).not.toContain(created.key.split('_')[2]);
    expect(text).not.toContain(createHash('sha256').update(created.key).digest('hex'));
  });

  it('records no key that was refused (bad scope), and nothing for an unknown key revoked', async () => {
    await expect(keys.create('bad', ['has space'])).rejects.toBeInstanceOf(ApiKeyInputError);
    expect(await keys.revoke('nosuchkey234')).toBe(false);
    expect(await withClient(db.url, (c) => c.query('SELECT 1 FROM mcp_audit_event'))).toMatchObject({
      rowCount: 0,
    });
  });

  it('records a principal refused for AUTH_REQUIRED_SCOPES by the guard, with the route', async () => {
    const { id, key } = await keys.create('scopeless', []);
    await withClient(db.url, (c) => c.query('DELETE FROM mcp_audit_event'));
    const answer = await modernCall(
      url,
      1,
      'tools/list',
      {},
      { headers: { authorization: `Bearer ${key}` } },
    );
    expect(answer.status).toBe(403);
    const refused = await waitFor(
      () => rows('auth.scope_refused'),
      (r) => r.length > 0,
      { what: 'the refusal row', timeoutMs: 5000 },
    );
    expect(refused).toEqual([
      {
        kind: 'auth.scope_refused',
        actor: 'owner',
        principal: `apikey:${id}`,
        tool: null,
        era: null,
        request_id: expect.any(String),
        detail: { missing: ['tasks:read'], route: 'POST /mcp' },
      },
    ]);
  });

  it("records a tool's scope refusal with the tool, the era and the missing scopes", async () => {
    const answer = await modernCall(
      url,
      2,
      'tools/call',
      { name: 'audit_guarded', arguments: {} },
      {
        name: 'audit_guarded',
        headers: { 'x-forwarded-user': 'frank', [PROXY_SECRET_HEADER]: PROXY_SECRET },
      },
    );
    expect(answer.status).toBe(403);
    const refused = await waitFor(
      () => rows('auth.scope_refused'),
      (r) => r.length > 0,
      { what: 'the refusal row', timeoutMs: 5000 },
    );
    expect(refused).toEqual([
      {
        kind: 'auth.scope_refused',
        actor: 'owner',
        principal: expect.stringMatching(/^proxy:/),
        tool: 'audit_guarded',
        era: 'modern',
        request_id: expect.any(String),
        detail: { missing: ['probe:write'], route: 'tools/call' },
      },
    ]);
  });

  it('a flood of refusals: every request is answered, every refusal recorded, no more than 1000 waiting', async () => {
    const { key } = await keys.create('flooder', []);
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        modernCall(url, i, 'tools/list', {}, { headers: { authorization: `Bearer ${key}` } }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(40).fill(403));
    await waitFor(
      () => rows('auth.scope_refused'),
      (r) => r.length === 40,
      { what: '40 refusal rows', timeoutMs: 10000 },
    );

    // Past the bound: one INSERT in flight takes the first, 1000 wait for the next, the rest are dropped.
    await withClient(db.url, (c) => c.query('DELETE FROM mcp_audit_event'));
    const audit = app.get(AuditTrail);
    const dropped = async (): Promise<number> => {
      const metric = await app.get(MetricsService).registry.getSingleMetric('mcp_audit_dropped_total')?.get();
      return metric?.values[0]?.value ?? 0;
    };
    const droppedBefore = await dropped();
    for (let i = 0; i < 1500; i++) {
      audit.recordSoon({ kind: 'auth.scope_refused', principal: `flood:${i}`, detail: { missing: ['x'] } });
    }
    await audit.onApplicationShutdown(); // waits for the INSERTs in flight
    const written = await rows('auth.scope_refused');
    expect(written).toHaveLength(1001);
    expect(written.map((r) => r.principal)).toEqual(Array.from({ length: 1001 }, (_, i) => `flood:${i}`));
    expect((await dropped()) - droppedBefore).toBe(499);
  });
});
