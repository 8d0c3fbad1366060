import type { INestApplication } from '@nestjs/common';
import { responseOf, rpc, sessionHeaders } from '../support/mcp-http.js';
import { asUser, freshUser, LegacyClient, modern, PROXY_SECRET, waitFor } from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const ELICIT = { elicitation: {} };

/**
 * Text PostgreSQL can never store (a NUL character; an unpaired UTF-16 surrogate) is refused where it
 * comes in, with -32602 naming where it is, instead of failing a write later (-32603) or, stored in a
 * tool's outcome, being retried for minutes: tool arguments, tasks/update answers, input responses of a
 * retried call, and a client's answer to an elicitation.
 */
describe('text PostgreSQL cannot store, refused at the edge', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    db = await createTestDatabase('unstorable');
    app = await createTestApp(db.url, {
      MCP_CONFORMANCE_FIXTURES: 'true',
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      TASK_INLINE_WINDOW_MS: '50',
    });
    url = await loopbackUrl(app, '/mcp');
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const call = async (user: string, method: string, params: Record<string, unknown>) =>
    responseOf(await modern(url, method, params, { headers: asUser(user), caps: ELICIT }));

  it('a tasks/update answer with a NUL character: -32602 naming it; the task still waits and completes', async () => {
    const user = freshUser('nul');
    const created = (await call(user, 'tools/call', { name: 'multi_input', arguments: {} })).result;
    expect(created.resultType).toBe('task');
    const parked = await waitFor(
      async () => (await call(user, 'tasks/get', { taskId: created.taskId })).result,
      (t) => t.status === 'input_required',
    );
    const answers = (first: string): Record<string, unknown> =>
      Object.fromEntries(
        Object.keys(parked.inputRequests).map((key) => [
          key,
          {
            action: 'accept',
            content: key.endsWith('first_name') ? { first_name: first } : { last_name: 'Lovelace' },
          },
        ]),
      );
    const firstKey = Object.keys(parked.inputRequests).find((k) => k.endsWith('first_name'))!;
    const refused = await call(user, 'tasks/update', {
      taskId: created.taskId,
      inputResponses: answers('Ada\u0000'),
    });
    expect(refused.error).toEqual({
      code: -32602,
      message: `params.inputResponses.${firstKey}.content.first_name contains a NUL character (\\u0000), which cannot be stored`,
    });
    expect((await call(user, 'tasks/get', { taskId: created.taskId })).result.status).toBe('input_required');
    await call(user, 'tasks/update', { taskId: created.taskId, inputResponses: answers('Ada') });
    const done = await waitFor(
      async () => (await call(user, 'tasks/get', { taskId: created.taskId })).result,
      (t) => t.status === 'completed',
    );
    expect(JSON.stringify(done.result)).toContain('Ada');
  });

  it('tool arguments and input responses of a call: -32602 naming where', async () => {
    const user = freshUser('args');
    const args = await call(user, 'tools/call', { name: 'multi_input', arguments: { note: 'x\u0000' } });
    expect(args.error).toEqual({
      code: -32602,
      message: 'params.arguments.note contains a NUL character (\\u0000), which cannot be stored',
    });
    const surrogate = await call(user, 'tools/call', {
      name: 'multi_input',
      arguments: {},
      inputResponses: { q: { action: 'accept', content: { name: 'bad \ud800' } } },
    });
    expect(surrogate.error).toEqual({
      code: -32602,
      message:
        'params.inputResponses.q.content.name contains an unpaired UTF-16 surrogate, which cannot be stored',
    });
  });

  it("a legacy client's answer to an elicitation: refused with -32602 (HTTP 400)", async () => {
    const client = await LegacyClient.open(url, ELICIT, asUser(freshUser('legacy')));
    const answer = await rpc(
      url,
      { jsonrpc: '2.0', id: 'srv-1', result: { action: 'accept', content: { name: 'Ada\u0000' } } },
      sessionHeaders(client.sessionId, client.identity),
    );
    expect(answer.status).toBe(400);
    expect(answer.json.error).toEqual({
      code: -32602,
      message: 'result.content.name contains a NUL character (\\u0000), which cannot be stored',
    });
  });
});
