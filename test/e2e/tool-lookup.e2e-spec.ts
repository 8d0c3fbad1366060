import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { McpTool } from '../../src/tool-dispatch/index.js';
import { ToolRegistry } from '../../src/tool-dispatch/tool-registry.service.js';
import { modernCall, openSession, responseOf, rpc, sessionHeaders } from '../support/mcp-http.js';
import { EXT_CAPS } from '../support/tasks-e2e.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

@Injectable()
class LookupProbe {
  @McpTool({ name: 'lookup_plain', description: 'Answers inline.', input: { type: 'object' } })
  plain(): string {
    return 'plain';
  }

  @McpTool({
    name: 'lookup_task',
    description: 'Always a task.',
    input: { type: 'object' },
    taskSupport: 'required',
  })
  task(): string {
    return 'task';
  }
}

@Module({ providers: [LookupProbe] })
class LookupProbeModule {}

/**
 * Issue 21: a tools/call looks its tool up once, in the era handler, and hands the resolved tool (and the
 * caller's access) down to the scope check, the header check, the task decision and the dispatch. Counted
 * on the catalog's own map (`get`, the one way a tool is found by name; the telemetry's label guard only
 * asks `has`).
 */
describe('one tool lookup per tools/call (real HTTP, both eras)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;
  const lookups = new Map<string, number>();

  beforeAll(async () => {
    db = await createTestDatabase('tool_lookup');
    app = await createTestApp(db.url, {}, [LookupProbeModule]);
    url = `${await app.getUrl()}/mcp`;
    const registry: unknown = app.get(ToolRegistry);
    const tools = (registry as { catalog: { tools: Map<string, unknown> } }).catalog.tools;
    const get = tools.get.bind(tools);
    tools.get = (name: string) => {
      lookups.set(name, (lookups.get(name) ?? 0) + 1);
      return get(name);
    };
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const counted = async (name: string, call: () => Promise<void>): Promise<number> => {
    lookups.delete(name);
    await call();
    return lookups.get(name) ?? 0;
  };

  it('modern (2026-07-28): an inline call looks the tool up once', async () => {
    const n = await counted('lookup_plain', async () => {
      const answer = await modernCall(
        url,
        1,
        'tools/call',
        { name: 'lookup_plain', arguments: {} },
        {
          name: 'lookup_plain',
        },
      );
      expect(responseOf(answer)?.result?.content).toEqual([{ type: 'text', text: 'plain' }]);
    });
    expect(n).toBe(1);
  });

  it('modern (2026-07-28): a call that becomes a task looks the tool up once', async () => {
    const n = await counted('lookup_task', async () => {
      const answer = await modernCall(
        url,
        2,
        'tools/call',
        { name: 'lookup_task', arguments: {} },
        {
          name: 'lookup_task',
          caps: EXT_CAPS,
        },
      );
      expect(responseOf(answer)?.result?.resultType).toBe('task');
    });
    expect(n).toBe(1);
  });

  it('legacy (2025-11-25): an inline call looks the tool up once', async () => {
    const session = await openSession(url);
    const n = await counted('lookup_plain', async () => {
      const answer = await rpc(
        url,
        { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'lookup_plain', arguments: {} } },
        sessionHeaders(session),
      );
      expect(responseOf(answer)?.result?.content).toEqual([{ type: 'text', text: 'plain' }]);
    });
    expect(n).toBe(1);
  });

  it('legacy (2025-11-25): a task call and its run look the tool up once', async () => {
    const session = await openSession(url);
    const n = await counted('lookup_task', async () => {
      const created = await rpc(
        url,
        {
          jsonrpc: '2.0',
          id: 4,
          method: 'tools/call',
          params: { name: 'lookup_task', arguments: {}, task: {} },
        },
        sessionHeaders(session),
      );
      const taskId = responseOf(created)?.result?.task?.taskId as string;
      expect(typeof taskId).toBe('string');
      const result = await rpc(
        url,
        { jsonrpc: '2.0', id: 5, method: 'tasks/result', params: { taskId } },
        sessionHeaders(session),
      );
      expect(responseOf(result)?.result?.content).toEqual([{ type: 'text', text: 'task' }]);
    });
    expect(n).toBe(1);
  });
});
