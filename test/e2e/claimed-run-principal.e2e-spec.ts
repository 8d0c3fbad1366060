import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { McpTool, type ToolContext } from '../../src/tool-dispatch/index.js';
import { LegacyClient, PROXY_SECRET, asUser, waitFor } from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/** A tool that answers with the caller it sees. */
@Injectable()
class WhoamiTools {
  @McpTool({
    name: 'whoami',
    description: 'Returns the principal the tool runs as.',
    taskSupport: 'optional',
  })
  whoami(_args: unknown, ctx: ToolContext): string {
    const { id, provider, subject, email, scopes, groups } = ctx.principal;
    return JSON.stringify({ id, provider, subject, email, scopes, groups });
  }
}

@Module({ providers: [WhoamiTools] })
class WhoamiModule {}

/**
 * A task created on a web instance runs on a worker that never saw the creating request: the tool still runs
 * as that caller, from the principal stored with the task (issue 22), not as a stand-in made of the owner id.
 */
describe('a claimed run calls the tool as the creating caller', () => {
  let db: TestDatabase;
  let web: INestApplication;
  let worker: INestApplication;
  const env = {
    JANITOR_ENABLED: 'false',
    AUTH_PROVIDERS: 'proxy',
    AUTH_PROXY_SECRET: PROXY_SECRET,
    AUTH_PROXY_SCOPES: 'reports:read,reports:write',
  };

  beforeAll(async () => {
    db = await createTestDatabase('claimed_principal');
    web = await createTestApp(db.url, { ...env, INSTANCE_ROLE: 'web' }, [WhoamiModule]);
    worker = await createTestApp(db.url, { ...env, INSTANCE_ROLE: 'worker' }, [WhoamiModule]);
  });
  afterAll(async () => {
    await Promise.all([web?.close(), worker?.close()]);
    await db?.drop();
  });

  it('runs with the stored principal: provider, subject, email, scopes and groups', async () => {
    const identity = {
      ...asUser('alice'),
      'x-forwarded-email': 'alice@example.com',
      'x-forwarded-groups': 'finance,auditors',
    };
    const client = await LegacyClient.open(await loopbackUrl(web, '/mcp'), {}, identity);
    const t = await client.createTask('whoami', {});
    const done = await waitFor(
      () => client.result('tasks/get', { taskId: t.taskId }),
      (r) => r.status !== 'working',
      { what: 'the task to end on the worker' },
    );
    expect(done.status).toBe('completed');
    const result = await client.result('tasks/result', { taskId: t.taskId });
    const seen = JSON.parse(result.content[0].text as string);
    expect(seen).toMatchObject({
      provider: 'proxy',
      subject: 'alice',
      email: 'alice@example.com',
      scopes: ['reports:read', 'reports:write'],
      groups: ['finance', 'auditors'],
    });
    expect(seen.id).toMatch(/^proxy:/);
  });
});
