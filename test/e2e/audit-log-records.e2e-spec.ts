import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { runCli } from '../../src/cli/cli.js';
import { modernCall, openSession, rpc, sessionHeaders } from '../support/mcp-http.js';
import { waitFor } from '../support/tasks-e2e.js';
import { startServer, stopServer, type ServerProcess } from '../support/server-process.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

type OtlpValue = { stringValue?: string; intValue?: string | number };

interface OtlpLogRecord {
  eventName?: string;
  timeUnixNano: string;
  severityNumber: number;
  body?: OtlpValue;
  attributes?: { key: string; value: OtlpValue }[];
  traceId?: string;
  spanId?: string;
}

interface Received {
  scope: string;
  record: OtlpLogRecord;
  attrs: Record<string, string | number | undefined>;
}

const PROXY_SECRET = 'otel-proxy-secret-0123456789abcdef';

/**
 * The built server with tracing on: every audit row it writes is also an OpenTelemetry log record, sent
 * over OTLP/HTTP (JSON) to a collector stand-in this test runs on loopback, once the row committed, in the
 * trace of the request that caused it. Rows the CLI writes are not (it runs no SDK): they reach a SIEM by
 * `audit export`.
 */
describe('audit rows as OpenTelemetry log records (built server, real OTLP receiver)', () => {
  let db: TestDatabase;
  let collector: Server;
  let server: ServerProcess;
  const received: Received[] = [];
  const proxy = (user: string) => ({ 'x-forwarded-user': user, 'x-auth-proxy-secret': PROXY_SECRET });

  beforeAll(async () => {
    db = await createTestDatabase('audit_otel');
    collector = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        if (req.url === '/v1/logs') {
          const parsed = JSON.parse(body) as {
            resourceLogs: { scopeLogs: { scope: { name: string }; logRecords: OtlpLogRecord[] }[] }[];
          };
          for (const rl of parsed.resourceLogs)
            for (const sl of rl.scopeLogs)
              for (const record of sl.logRecords) {
                const attrs = Object.fromEntries(
                  (record.attributes ?? []).map((a) => [a.key, a.value.stringValue ?? a.value.intValue]),
                );
                received.push({ scope: sl.scope.name, record, attrs });
              }
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    const { port } = collector.address() as AddressInfo;
    server = await startServer({
      DATABASE_URL: db.url,
      AUTH_PROVIDERS: 'proxy,apikey',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      AUTH_PROXY_SCOPES: 'tasks:read',
      AUTH_REQUIRED_SCOPES: 'tasks:read',
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_BLRP_SCHEDULE_DELAY: '100',
    });
  });
  afterAll(async () => {
    if (server) await stopServer(server);
    await new Promise((resolve) => collector.close(resolve));
    await db.drop();
  });

  const byKind = (kind: string) => received.filter((r) => r.attrs['mcp.audit.kind'] === kind);

  it('emits session.opened and session.ended after commit, in the trace of the request', async () => {
    const url = `${server.baseUrl}/mcp`;
    const traceId = randomBytes(16).toString('hex');
    const traceparent = `00-${traceId}-${randomBytes(8).toString('hex')}-01`;
    const sessionId = await openSession(url, {}, { ...proxy('gina'), traceparent });
    const closeTrace = randomBytes(16).toString('hex');
    const closed = await rpc(
      url,
      undefined,
      sessionHeaders(sessionId, {
        ...proxy('gina'),
        traceparent: `00-${closeTrace}-${randomBytes(8).toString('hex')}-01`,
      }),
      'DELETE',
    );
    expect(closed.status).toBe(200);

    await waitFor(
      async () => byKind('session.ended').length,
      (n) => n > 0,
      { what: 'the session.ended log record', timeoutMs: 20000 },
    );
    const [opened] = byKind('session.opened').filter((r) => r.attrs['mcp.audit.session_id'] === sessionId);
    const [ended] = byKind('session.ended');
    const principal = opened.attrs['mcp.audit.principal'];
    expect(principal).toMatch(/^proxy:/);
    const row = await withClient(db.url, (c) =>
      c.query<{ instance_id: string; request_id: string; trace_id: string }>(
        `SELECT instance_id, request_id, trace_id FROM mcp_audit_event WHERE kind = 'session.opened'`,
      ),
    );
    expect(opened).toEqual({
      scope: 'mcp-task-server.audit',
      record: expect.objectContaining({
        eventName: 'mcp.audit.session.opened',
        severityNumber: 9,
        body: { stringValue: `session.opened by owner ${principal}` },
        traceId,
      }),
      attrs: {
        'mcp.audit.kind': 'session.opened',
        'mcp.audit.actor': 'owner',
        'mcp.audit.principal': principal,
        'mcp.audit.session_id': sessionId,
        'mcp.audit.era': 'legacy',
        'mcp.audit.instance_id': row.rows[0].instance_id,
        'mcp.audit.request_id': row.rows[0].request_id,
        'mcp.audit.detail': JSON.stringify({
          protocolVersion: '2025-11-25',
          clientName: 'e2e',
        }),
      },
    });
    // The row in PostgreSQL carries the same trace id the log record is linked to.
    expect(row.rows[0].trace_id).toBe(traceId);
    expect(ended.record.traceId).toBe(closeTrace);
    expect(ended.attrs).toMatchObject({
      'mcp.audit.session_id': sessionId,
      'mcp.audit.detail': JSON.stringify({ reason: 'client' }),
    });
  });

  it('emits a refused scope; a row the CLI wrote is not emitted by the server', async () => {
    const out: string[] = [];
    const code = await runCli(
      ['apikey', 'create', '--name', 'otel-bot', '--json'],
      { DATABASE_URL: db.url, LOG_LEVEL: 'error' },
      { out: (l) => out.push(l), err: () => undefined },
    );
    expect(code).toBe(0);
    const { id, key } = JSON.parse(out.join('\n')) as { id: string; key: string };
    const answer = await modernCall(
      `${server.baseUrl}/mcp`,
      1,
      'tools/list',
      {},
      {
        headers: { authorization: `Bearer ${key}` },
      },
    );
    expect(answer.status).toBe(403);
    const refused = await waitFor(
      async () => byKind('auth.scope_refused'),
      (r) => r.length > 0,
      { what: 'the auth.scope_refused log record', timeoutMs: 20000 },
    );
    expect(refused.map((r) => r.attrs)).toEqual([
      expect.objectContaining({
        'mcp.audit.actor': 'owner',
        'mcp.audit.principal': `apikey:${id}`,
        'mcp.audit.detail': JSON.stringify({ missing: ['tasks:read'], route: 'POST /mcp' }),
      }),
    ]);
    // Everything the server wrote was emitted, once; the CLI's row only in PostgreSQL.
    const rows = await withClient(db.url, (c) =>
      c.query<{ kind: string; instance_id: string | null }>(
        'SELECT kind, instance_id FROM mcp_audit_event ORDER BY id',
      ),
    );
    const fromServer = rows.rows.filter((r) => r.instance_id !== null).map((r) => r.kind);
    expect(fromServer.sort()).toEqual(received.map((r) => String(r.attrs['mcp.audit.kind'])).sort());
    expect(rows.rows.find((r) => r.kind === 'api_key.created')).toEqual({
      kind: 'api_key.created',
      instance_id: null,
    });
    expect(byKind('api_key.created')).toEqual([]);
  });
});
