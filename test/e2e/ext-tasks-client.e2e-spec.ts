import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import {
  createTaskSessionFromClient,
  toolDeclarationFromMcpTool,
  type ApplicationInputRequest,
  type SerializedTaskReference,
  type TaskEnabledSession,
  type TaskOutcome,
  type ToolDeclaration,
} from '@modelcontextprotocol/ext-tasks/client';
import {
  LEGACY,
  MODERN,
  modernCall,
  modernHeaders,
  modernMeta,
  openStream,
  responseOf,
  rpc,
} from '../support/mcp-http.js';
import { startServer, stopServer, type ServerProcess } from '../support/server-process.js';
import { EXT_CAPS, nextMatching, rpcId, TASKS_EXT } from '../support/tasks-e2e.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

type Era = 'legacy' | 'modern';
type ToolResult = { resultType?: string; content: { type: string; text?: string }[]; isError?: boolean };
type JsonRecord = Record<string, unknown>;

const CLIENT_INFO = { name: 'ext-tasks-e2e', version: '1.0.0' };
const ENDPOINT = 'ext-tasks-e2e';

/**
 * The official tasks client library, `@modelcontextprotocol/ext-tasks` (what MCP Inspector uses), on the official
 * SDK client against the built server, spawned, in both eras: it settles a task only from a result that validates
 * against its era's schema (2026-07-28: `tasks/get` inlines the call's answer, `resultType` included).
 */
describe('the @modelcontextprotocol/ext-tasks client against a spawned server, both eras', () => {
  let db: TestDatabase;
  let server: ServerProcess;
  const servers: ServerProcess[] = [];
  const open: { session: TaskEnabledSession; client: Client }[] = [];

  const env = (): Record<string, string> => ({
    DATABASE_URL: db.url,
    MCP_CONFORMANCE_FIXTURES: 'true',
    INSTANCE_HEARTBEAT_MS: '1000',
    TASK_LEASE_MS: '3000',
    JANITOR_INTERVAL_MS: '1000',
  });

  async function start(): Promise<void> {
    server = await startServer(env());
    servers.push(server);
  }

  /**
   * Jest runs the suite in a realm of its own, where `Response.json()` (Node's) builds objects the library's JSON check
   * (plain objects of its realm only) refuses; a host outside jest never sees this. The body is parsed here instead.
   */
  const fetchInThisRealm: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    Object.defineProperty(res, 'json', { value: async () => JSON.parse(await res.text()) as unknown });
    return res;
  };

  /** The host's raw path for the 2026-07-28 task traffic the SDK client leaves to it (the library's contract). */
  function rawDispatch(url: string) {
    return async (request: unknown) => {
      const framed = request as { method: string; params?: { name?: string; taskId?: string } };
      const name = framed.method === 'tools/call' ? framed.params?.name : framed.params?.taskId;
      const body = { jsonrpc: '2.0', id: rpcId(), ...framed };
      const answer = await rpc(url, body, modernHeaders(framed.method, name));
      const response = responseOf(answer);
      if (!response) throw new Error(`no JSON-RPC response: ${answer.status} ${answer.text}`);
      return 'error' in response
        ? { kind: 'error' as const, error: response.error }
        : { kind: 'result' as const, result: response.result };
    };
  }

  /** A task session for one era: confirms every question, knows the server's tool declarations. */
  async function connect(era: Era): Promise<TaskEnabledSession> {
    const url = `${server.baseUrl}/mcp`;
    const client = new Client(CLIENT_INFO, {
      capabilities: { elicitation: {}, ...(era === 'modern' ? { extensions: { [TASKS_EXT]: {} } } : {}) },
      versionNegotiation: { mode: era === 'modern' ? { pin: MODERN } : 'legacy' },
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: fetchInThisRealm }));
    const tools = new Map<string, ToolDeclaration>();
    for (const tool of (await client.listTools()).tools)
      tools.set(tool.name, toolDeclarationFromMcpTool(tool));
    const onInputRequest = async (request: ApplicationInputRequest): Promise<any> => {
      if (request.kind !== 'elicitation') throw new Error(`unexpected ${request.kind} request`);
      return { action: 'accept', content: { confirm: true } };
    };
    const session =
      era === 'modern'
        ? createTaskSessionFromClient(client, {
            endpointId: ENDPOINT,
            tools: { currentTool: (name) => tools.get(name) },
            onInputRequest,
            rawDispatch: rawDispatch(url),
            v2RequestFraming: {
              protocolVersion: MODERN,
              clientInfo: CLIENT_INFO,
              clientCapabilities: { elicitation: {} },
            },
          })
        : createTaskSessionFromClient(client, {
            endpointId: ENDPOINT,
            tools: { currentTool: (name) => tools.get(name) },
            onInputRequest,
          });
    open.push({ session, client });
    expect(session.capabilities.execution).toBe(true);
    return session;
  }

  /** Calls a tool; a legacy client asks for a task (the 2026-07-28 server decides on its own). */
  const call = (session: TaskEnabledSession, era: Era, name: string, args: JsonRecord) =>
    session.callTool(name, args as never, era === 'legacy' ? { task: { preference: 'prefer' } } : {});

  const text = (outcome: TaskOutcome<unknown>): string | undefined =>
    outcome.status === 'completed' ? (outcome.result as ToolResult).content[0]?.text : undefined;

  /** The outcome's status, with a failure's message in view when the test expected a completion. */
  const described = (outcome: TaskOutcome<unknown>): JsonRecord =>
    outcome.status === 'failed'
      ? { status: 'failed', message: outcome.error.message, data: outcome.error.data }
      : { status: outcome.status };

  beforeAll(async () => {
    db = await createTestDatabase('ext_tasks_client');
    await start();
  });
  afterAll(async () => {
    for (const { session, client } of open) {
      await session.close().catch(() => undefined);
      await client.close().catch(() => undefined);
    }
    for (const s of servers) await stopServer(s, 'SIGKILL');
    await db.drop();
  });

  describe.each<[Era, string]>([
    ['modern', MODERN],
    ['legacy', LEGACY],
  ])('%s era (%s)', (era) => {
    it('settles a two-second task with its content', async () => {
      const session = await connect(era);
      const execution = await call(session, era, 'slow_compute', { seconds: 2, label: `${era} report` });
      expect(execution.kind).toBe('task');
      const { outcome } = await execution.settle();
      expect(described(outcome)).toEqual({ status: 'completed' });
      expect(text(outcome)).toBe(`Computed ${era} report after 2 s`);
      if (outcome.status !== 'completed') return;
      const result = outcome.result as ToolResult;
      // Each era's own shape: the modern answer says what it is; the legacy one has no such field.
      if (era === 'modern') expect(result.resultType).toBe('complete');
      else expect(result).not.toHaveProperty('resultType');
    });

    it('answers a question through the library and settles the task', async () => {
      const session = await connect(era);
      const execution = await call(session, era, 'confirm_delete', { filename: `${era}.txt` });
      expect(execution.kind).toBe('task');
      const seen: string[] = [];
      const { outcome } = await execution.settle({
        onEvent: (event) => {
          if (event.type === 'task') seen.push(event.task.status);
        },
      });
      expect(described(outcome)).toEqual({ status: 'completed' });
      expect(text(outcome)).toBe(`Deleted ${era}.txt`);
      expect(seen).toContain('input_required');
    });

    it('cancels a running task', async () => {
      const session = await connect(era);
      const execution = await call(session, era, 'slow_compute', { seconds: 60 });
      expect(execution.kind).toBe('task');
      await execution.cancel();
      const { outcome } = await execution.settle();
      expect(outcome.status).toBe('cancelled');
    });

    it('settles a tool error (isError) as its era says', async () => {
      const session = await connect(era);
      const execution = await call(session, era, 'failing_job', {});
      expect(execution.kind).toBe('task');
      const { outcome } = await execution.settle();
      if (era === 'legacy') {
        // 2025-11-25: a task whose tool answered isError is failed; the library reports the tool's text.
        expect(described(outcome)).toMatchObject({
          status: 'failed',
          message: 'failing_job failed on purpose',
        });
        return;
      }
      // 2026-07-28: the call completed, and its result is the error result.
      expect(described(outcome)).toEqual({ status: 'completed' });
      if (outcome.status !== 'completed') return;
      expect(outcome.result).toMatchObject({
        resultType: 'complete',
        isError: true,
        content: [{ type: 'text', text: expect.stringContaining('failing_job failed on purpose') }],
      });
    });
  });

  it('sends the same result in notifications/tasks as tasks/get inlines and as an inline call answers', async () => {
    const url = `${server.baseUrl}/mcp`;
    const session = await connect('modern');
    const execution = await session.callTool('slow_compute', { seconds: 2, label: 'watched' });
    if (execution.kind !== 'task') throw new Error('expected a task');
    const taskId = execution.handle.taskId;
    const stream = await openStream(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...modernHeaders('subscriptions/listen'),
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: rpcId(),
        method: 'subscriptions/listen',
        params: { notifications: { taskIds: [taskId] }, _meta: modernMeta(EXT_CAPS) },
      }),
    });
    try {
      const { event } = await nextMatching(
        stream,
        (ev) => ev.json?.method === 'notifications/tasks' && ev.json.params.status === 'completed',
      );
      const notified = (event.json as { params: { result: JsonRecord } }).params.result;
      const inline = responseOf(
        await modernCall(
          url,
          rpcId(),
          'tools/call',
          { name: 'slow_compute', arguments: { seconds: 0, label: 'watched' } },
          { caps: EXT_CAPS, name: 'slow_compute' },
        ),
      ).result as JsonRecord;
      // The same call answered inline: the same fields, only its text differs by the seconds worked.
      expect(Object.keys(notified).sort()).toEqual(Object.keys(inline).sort());
      expect(notified).toMatchObject({ resultType: 'complete', _meta: inline._meta });
      expect(notified.content).toEqual([{ type: 'text', text: 'Computed watched after 2 s' }]);
      // And what the library settles from tasks/get is that same result.
      const { outcome } = await execution.settle();
      expect(described(outcome)).toEqual({ status: 'completed' });
      if (outcome.status === 'completed') expect(outcome.result).toEqual(notified);
    } finally {
      stream.close();
    }
  });

  it.each<Era>(['modern', 'legacy'])(
    'resumes a %s task from a saved reference after the server restarts',
    async (era) => {
      const session = await connect(era);
      const execution = await call(session, era, 'durable_steps', { steps: 8, stepMs: 250 });
      expect(execution.kind).toBe('task');
      if (execution.kind !== 'task') return;
      let saved = '';
      await execution.handoff((reference) => {
        saved = JSON.stringify(reference);
      });

      // A drain hands the resumable run back to the queue; the next process picks it up.
      await new Promise((resolve) => setTimeout(resolve, 600));
      await stopServer(server);
      await start();

      const again = await connect(era);
      const resumed = await again.resumeTask(JSON.parse(saved) as SerializedTaskReference);
      expect(resumed.kind).toBe('task');
      const { outcome } = await resumed.settle();
      expect(described(outcome)).toEqual({ status: 'completed' });
      expect(text(outcome)).toMatch(/^Completed 8 steps on attempt \d+ \(resumed from step \d+\)$/);
    },
    60_000,
  );
});
