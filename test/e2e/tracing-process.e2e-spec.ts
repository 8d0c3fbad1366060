import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { openSession, rpc, sessionHeaders } from '../support/mcp-http.js';
import { waitFor } from '../support/tasks-e2e.js';
import { startServer, stopServer, type ServerProcess } from '../support/server-process.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: Record<string, unknown> }[];
}

const SERVER_KIND = 2; // OTLP SpanKind SPAN_KIND_SERVER

/**
 * The built server as operators run it (`node dist/src/main.js`), tracing turned on by the standard
 * variables and exporting OTLP/HTTP (JSON) to a collector stand-in on loopback. Proves the ESM start order
 * works: the auto-instrumentations really produce HTTP, Express and pg spans, in one trace with the MCP span.
 */
describe('tracing in the server process (OTLP export, auto-instrumentation)', () => {
  let db: TestDatabase;
  let collector: Server;
  let server: ServerProcess;
  const spans: OtlpSpan[] = [];
  const resources: Record<string, unknown>[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('tracing_proc');
    collector = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        if (req.url === '/v1/traces') {
          const parsed = JSON.parse(body) as {
            resourceSpans: { resource: Record<string, unknown>; scopeSpans: { spans: OtlpSpan[] }[] }[];
          };
          for (const rs of parsed.resourceSpans) {
            resources.push(rs.resource);
            for (const ss of rs.scopeSpans) spans.push(...ss.spans);
          }
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    const { port } = collector.address() as AddressInfo;
    server = await startServer({
      DATABASE_URL: db.url,
      MCP_CONFORMANCE_FIXTURES: 'true',
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      // The request below must reach PostgreSQL for its pg span: with sessions kept in memory it would not.
      SESSION_CACHE_MAX: '0',
    });
  });
  afterAll(async () => {
    if (server) await stopServer(server);
    await new Promise((resolve) => collector.close(resolve));
    await db.drop();
  });

  it('exports the MCP span inside the HTTP server span, with Express and pg spans in the same trace', async () => {
    expect(server.output()).toContain('tracing on (exporter: otlp)');
    const url = `${server.baseUrl}/mcp`;
    const sessionId = await openSession(url);
    const traceId = randomBytes(16).toString('hex');
    const parent = randomBytes(8).toString('hex');
    await rpc(
      url,
      {
        jsonrpc: '2.0',
        id: 5,
        method: 'tools/call',
        params: { name: 'test_simple_text', arguments: {} },
      },
      { ...sessionHeaders(sessionId), traceparent: `00-${traceId}-${parent}-01` },
    );

    const mcp = await waitFor(
      async () => spans.find((s) => s.name === 'tools/call test_simple_text'),
      (s) => s !== undefined,
      { what: 'the exported MCP span', timeoutMs: 20000 },
    );
    expect(mcp!.traceId).toBe(traceId);
    expect(mcp!.kind).toBe(SERVER_KIND);
    await waitFor(
      async () => spans.filter((s) => s.traceId === traceId),
      (inTrace) =>
        inTrace.some((s) => s.name === 'POST /mcp') &&
        inTrace.some((s) => s.name.startsWith('pg.query')) &&
        inTrace.some((s) => s.name.startsWith('request handler')),
      { what: 'HTTP, Express and pg spans in the trace', timeoutMs: 20000 },
    );
    const inTrace = spans.filter((s) => s.traceId === traceId);
    const http = inTrace.find((s) => s.name === 'POST /mcp')!;
    // The HTTP span continues the client's traceparent header; the MCP span sits under it (no _meta here).
    expect(http.parentSpanId).toBe(parent);
    const chain = new Map(inTrace.map((s) => [s.spanId, s]));
    let up: OtlpSpan | undefined = mcp;
    while (up && up.spanId !== http.spanId) up = up.parentSpanId ? chain.get(up.parentSpanId) : undefined;
    expect(up).toBe(http);
    // pg spans of the request (the session lookup) descend from the MCP span.
    const pgSpan = inTrace.find((s) => s.name.startsWith('pg.query'))!;
    let p: OtlpSpan | undefined = pgSpan;
    while (p && p.spanId !== mcp!.spanId) p = p.parentSpanId ? chain.get(p.parentSpanId) : undefined;
    expect(p).toBe(mcp);

    const serviceNames = resources.flatMap((r) =>
      (r.attributes as { key: string; value: { stringValue?: string } }[])
        .filter((a) => a.key === 'service.name')
        .map((a) => a.value.stringValue),
    );
    expect(serviceNames).toContain('mcp-task-server');
  });
});
