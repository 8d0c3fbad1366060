import type { INestApplication } from '@nestjs/common';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { createHash, randomBytes } from 'node:crypto';
import { JanitorService } from '../../src/janitor/janitor.service.js';
import { modernCall, responseOf, rpc } from '../support/mcp-http.js';
import { EXT_CAPS, LegacyClient, rpcId, waitFor } from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

/** A W3C traceparent the "client" started, with fresh random ids. */
function clientTrace(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

/**
 * Span trees the server produces, captured by an in-memory exporter registered as the global tracer
 * provider (what the SDK does at startup when tracing is on). The app is the real AppModule over real HTTP.
 */
describe('OpenTelemetry spans (in-memory exporter, real HTTP)', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;

  const spans = (): ReadableSpan[] => exporter.getFinishedSpans();
  const spanId = (s: ReadableSpan): string => s.spanContext().spanId;
  const traceId = (s: ReadableSpan): string => s.spanContext().traceId;
  const parentOf = (s: ReadableSpan): string | undefined => s.parentSpanContext?.spanId;

  function waitForSpan(what: string, match: (s: ReadableSpan) => boolean): Promise<ReadableSpan> {
    return waitFor(
      async () => spans().find(match),
      (s) => s !== undefined,
      { what, timeoutMs: 20000 },
    ) as Promise<ReadableSpan>;
  }

  beforeAll(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(provider);
    db = await createTestDatabase('tracing');
    app = await createTestApp(db.url, {
      MCP_CONFORMANCE_FIXTURES: 'true',
      JANITOR_ENABLED: 'false',
      TASK_POLL_INTERVAL_MS: '250',
    });
    url = await loopbackUrl(app, '/mcp');
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
    await provider.shutdown();
    trace.disable();
    context.disable();
  });
  beforeEach(() => exporter.reset());

  it('an inline tools/call: one SERVER span, child of params._meta.traceparent, with the MCP attributes', async () => {
    const c = await LegacyClient.open(url);
    const parent = clientTrace();
    const id = rpcId();
    const answer = await rpc(
      url,
      {
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: {
          name: 'test_simple_text',
          arguments: {},
          _meta: { traceparent: parent.traceparent },
        },
      },
      c.headers(),
    );
    expect(responseOf(answer).result.isError).not.toBe(true);
    const span = await waitForSpan('tools/call span', (s) => s.name === 'tools/call test_simple_text');
    expect(span.kind).toBe(SpanKind.SERVER);
    expect(traceId(span)).toBe(parent.traceId);
    expect(parentOf(span)).toBe(parent.spanId);
    expect(span.attributes).toMatchObject({
      'mcp.method.name': 'tools/call',
      'jsonrpc.request.id': String(id),
      'mcp.protocol.version': '2025-11-25',
      'gen_ai.tool.name': 'test_simple_text',
      'gen_ai.operation.name': 'execute_tool',
      'network.transport': 'tcp',
    });
    // The session id is a bearer secret: only its digest is recorded, never the id itself.
    expect(span.attributes['mcp.session.id']).toBe(createHash('sha256').update(c.sessionId).digest('hex'));
    expect(JSON.stringify(spans().map((s) => s.attributes))).not.toContain(c.sessionId);
    expect(span.status.code).not.toBe(SpanStatusCode.ERROR);
  });

  it('falls back to the traceparent HTTP header, and _meta wins over it (the header context is linked)', async () => {
    const header = clientTrace();
    await modernCall(url, rpcId(), 'tools/list', {}, { headers: { traceparent: header.traceparent } });
    const listed = await waitForSpan('tools/list span', (s) => s.name === 'tools/list');
    expect(traceId(listed)).toBe(header.traceId);
    expect(parentOf(listed)).toBe(header.spanId);
    expect(listed.attributes['mcp.protocol.version']).toBe('2026-07-28');
    expect(listed.attributes['mcp.session.id']).toBeUndefined();

    exporter.reset();
    const meta = clientTrace();
    const other = clientTrace();
    await modernCall(
      url,
      rpcId(),
      'tools/call',
      { name: 'test_simple_text', arguments: {} },
      {
        name: 'test_simple_text',
        meta: { traceparent: meta.traceparent },
        headers: { traceparent: other.traceparent },
      },
    );
    const called = await waitForSpan('tools/call span', (s) => s.name === 'tools/call test_simple_text');
    expect(traceId(called)).toBe(meta.traceId);
    expect(parentOf(called)).toBe(meta.spanId);
    expect(called.links.map((l) => l.context.spanId)).toEqual([other.spanId]);
  });

  it('a request the server sends to the client (elicitation) carries the server span in _meta', async () => {
    const client = new Client(
      { name: 'tracing-e2e', version: '1.0.0' },
      { capabilities: { elicitation: {} } },
    );
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    try {
      const asked: Record<string, unknown>[] = [];
      client.setRequestHandler(ElicitRequestSchema, (req) => {
        asked.push(req.params._meta ?? {});
        return { action: 'accept', content: { username: 'ada', email: 'ada@example.com' } };
      });
      const parent = clientTrace();
      await client.callTool({
        name: 'test_elicitation',
        arguments: { message: 'Who?' },
        _meta: { traceparent: parent.traceparent },
      });
      const call = await waitForSpan('call span', (s) => s.name === 'tools/call test_elicitation');
      expect(traceId(call)).toBe(parent.traceId);
      expect(asked).toHaveLength(1);
      expect(asked[0].traceparent).toBe(`00-${parent.traceId}-${spanId(call)}-01`);
    } finally {
      await client.close();
    }
  });

  it('marks a JSON-RPC error on the span with error.type and the error code', async () => {
    const answer = await modernCall(
      url,
      rpcId(),
      'tools/call',
      { name: 'no_such_tool' },
      { name: 'no_such_tool' },
    );
    const code = responseOf(answer).error.code as number;
    const span = await waitForSpan(
      'tools/call span',
      (s) => s.attributes['mcp.method.name'] === 'tools/call',
    );
    // An unknown tool is no low-cardinality target: the name is the method alone.
    expect(span.name).toBe('tools/call');
    expect(span.attributes['error.type']).toBe(String(code));
    expect(span.attributes['rpc.response.status_code']).toBe(String(code));
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
  });

  it('a 2025-11-25 task: its background run and its status notification are children of the creating span; a cancel links to it', async () => {
    const c = await LegacyClient.open(url);
    const parent = clientTrace();
    const created = await c.result('tools/call', {
      name: 'slow_compute',
      arguments: { seconds: 0 },
      task: {},
      _meta: { traceparent: parent.traceparent },
    });
    const taskId = created.task.taskId as string;
    const create = await waitForSpan('create span', (s) => s.name === 'tools/call slow_compute');
    expect(traceId(create)).toBe(parent.traceId);
    expect(parentOf(create)).toBe(parent.spanId);

    const run = await waitForSpan('run span', (s) => s.name === 'execute_tool slow_compute');
    expect(traceId(run)).toBe(parent.traceId);
    expect(parentOf(run)).toBe(spanId(create));
    expect(run.attributes).toMatchObject({ 'mcp.task.id': taskId, 'mcp.task.status': 'completed' });
    expect(run.events.map((e) => e.name)).toContain('task.status');

    const notified = await waitForSpan(
      'notification span',
      (s) => s.name === 'notifications/tasks/status' && s.attributes['mcp.task.status'] === 'completed',
    );
    expect(traceId(notified)).toBe(parent.traceId);
    expect(parentOf(notified)).toBe(spanId(create));

    // The trace survives in the database, so any instance continues it.
    const stored = await withClient(db.url, (pg) =>
      pg.query('SELECT trace_context FROM task WHERE id = $1', [taskId]),
    );
    expect(stored.rows[0].trace_context.traceparent).toBe(`00-${parent.traceId}-${spanId(create)}-01`);

    const long = await c.result('tools/call', { name: 'slow_compute', arguments: { seconds: 30 }, task: {} });
    const longCreate = await waitForSpan(
      'second create span',
      (s) => s.name === 'tools/call slow_compute' && s !== create,
    );
    await c.result('tasks/cancel', { taskId: long.task.taskId });
    const cancel = await waitForSpan('cancel span', (s) => s.name === 'tasks/cancel');
    expect(cancel.links.map((l) => l.context.spanId)).toContain(spanId(longCreate));
  });

  it('a 2026-07-28 escalated task: the task run continues the trace of the tools/call that escalated', async () => {
    const parent = clientTrace();
    const answer = await modernCall(
      url,
      rpcId(),
      'tools/call',
      { name: 'slow_compute', arguments: { seconds: 1 } },
      { caps: EXT_CAPS, name: 'slow_compute', meta: { traceparent: parent.traceparent } },
    );
    const created = responseOf(answer).result;
    expect(created.resultType).toBe('task');
    const call = await waitForSpan('call span', (s) => s.name === 'tools/call slow_compute');
    expect(traceId(call)).toBe(parent.traceId);
    expect(parentOf(call)).toBe(parent.spanId);
    const run = await waitForSpan(
      'escalated run span',
      (s) => s.name === 'execute_tool slow_compute' && s.attributes['mcp.task.escalated'] === true,
    );
    expect(traceId(run)).toBe(parent.traceId);
    expect(parentOf(run)).toBe(spanId(call));
    expect(run.attributes).toMatchObject({ 'mcp.task.id': created.taskId, 'mcp.task.status': 'completed' });
  });

  it('a janitor expiry joins the expired task’s trace and links to the sweep', async () => {
    const c = await LegacyClient.open(url);
    const parent = clientTrace();
    const created = await c.result('tools/call', {
      name: 'slow_compute',
      arguments: { seconds: 60 },
      task: { ttl: 1000 },
      _meta: { traceparent: parent.traceparent },
    });
    const create = await waitForSpan('create span', (s) => s.name === 'tools/call slow_compute');
    // Past its ttl (read from the database's clock), then one sweep.
    await waitFor(
      () =>
        withClient(db.url, (pg) =>
          pg.query('SELECT expires_at <= now() AS due FROM task WHERE id = $1', [created.task.taskId]),
        ),
      (r) => r.rows[0].due === true,
      { what: 'task past its ttl' },
    );
    await app.get(JanitorService).runOnce();
    const expired = await waitForSpan(
      'janitor span',
      (s) => s.name === 'janitor expire' && s.attributes['mcp.task.id'] === created.task.taskId,
    );
    const sweep = await waitForSpan('sweep span', (s) => s.name === 'janitor sweep');
    expect(traceId(expired)).toBe(parent.traceId);
    expect(parentOf(expired)).toBe(spanId(create));
    expect(expired.links.map((l) => l.context.spanId)).toEqual([spanId(sweep)]);
  });
});
