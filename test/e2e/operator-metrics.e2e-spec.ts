import type { INestApplication } from '@nestjs/common';
import { DataSource, type QueryRunner } from 'typeorm';
import { JanitorService } from '../../src/janitor/janitor.service.js';
import { modernCall, modernHeaders, modernMeta, openStream, responseOf } from '../support/mcp-http.js';
import { EXT_CAPS, LegacyClient, rpcId, waitFor } from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

const POOL_MAX = 4;

/** The value of one series in Prometheus text (labels matched exactly), or undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) got[k] = v;
    const keys = Object.keys(labels);
    if (Object.keys(got).length !== keys.length || keys.some((k) => got[k] !== labels[k])) continue;
    return Number(m[3]);
  }
  return undefined;
}

/**
 * The operator metrics added for issue #12, read from /metrics of the real app while real traffic, a real
 * pool, real SSE streams, a real LISTEN connection and real expired rows move them.
 */
describe('operator metrics on /metrics (real HTTP, real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let base: string;
  let url: string;

  const scrape = async (): Promise<string> => {
    const res = await fetch(`${base}/metrics`);
    expect(res.status).toBe(200);
    return res.text();
  };
  const value = async (name: string, labels: Record<string, string> = {}): Promise<number> =>
    sample(await scrape(), name, labels) ?? 0;

  beforeAll(async () => {
    db = await createTestDatabase('op_metrics');
    app = await createTestApp(db.url, {
      MCP_CONFORMANCE_FIXTURES: 'true',
      JANITOR_ENABLED: 'false',
      DB_POOL_MAX: String(POOL_MAX),
      TASK_EXPIRED_GRACE_MS: '0',
    });
    base = await loopbackUrl(app);
    url = `${base}/mcp`;
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('mcp_server_operation_duration_seconds counts each request by method, tool, error type and protocol version', async () => {
    const ok = {
      mcp_method_name: 'tools/call',
      gen_ai_tool_name: 'test_simple_text',
      error_type: '',
      mcp_protocol_version: '2026-07-28',
    };
    const before = await value('mcp_server_operation_duration_seconds_count', ok);
    await modernCall(url, rpcId(), 'tools/call', { name: 'test_simple_text' }, { name: 'test_simple_text' });
    await modernCall(url, rpcId(), 'tools/call', { name: 'test_simple_text' }, { name: 'test_simple_text' });
    expect(await value('mcp_server_operation_duration_seconds_count', ok)).toBe(before + 2);
    expect(await value('mcp_server_operation_duration_seconds_bucket', { ...ok, le: '+Inf' })).toBe(
      before + 2,
    );

    const failed = await modernCall(url, rpcId(), 'tools/call', { name: 'nope' }, { name: 'nope' });
    const code = String(responseOf(failed).error.code);
    // An unknown tool name never becomes a label value.
    expect(
      await value('mcp_server_operation_duration_seconds_count', {
        mcp_method_name: 'tools/call',
        gen_ai_tool_name: '',
        error_type: code,
        mcp_protocol_version: '2026-07-28',
      }),
    ).toBe(1);
    expect(await scrape()).not.toContain('"nope"');

    const c = await LegacyClient.open(url);
    await c.result('tools/list');
    expect(
      await value('mcp_server_operation_duration_seconds_count', {
        mcp_method_name: 'tools/list',
        gen_ai_tool_name: '',
        error_type: '',
        mcp_protocol_version: '2025-11-25',
      }),
    ).toBe(1);
  });

  it('reports the pool: size, connections in use and queries waiting for one', async () => {
    expect(await value('mcp_db_pool_max')).toBe(POOL_MAX);
    const ds = app.get(DataSource);
    const pool = (ds.driver as unknown as { master: { waitingCount: number } }).master;
    const held: QueryRunner[] = [];
    for (let i = 0; i < POOL_MAX; i++) {
      const r = ds.createQueryRunner();
      await r.connect();
      held.push(r);
    }
    try {
      // One more query than the pool has connections: it waits.
      const queued = ds.query('SELECT 1');
      await waitFor(
        async () => pool.waitingCount,
        (n) => n >= 1,
        { what: 'a waiting query' },
      );
      // The pool gauges are read when the scrape starts; the scrape's database-backed gauges then queue too.
      const scraping = fetch(`${base}/metrics`).then((r) => r.text());
      await waitFor(
        async () => pool.waitingCount,
        (n) => n >= 2,
        { what: 'the scrape to start' },
      );
      for (const r of held.splice(0)) await r.release();
      const text = await scraping;
      await queued;
      expect(sample(text, 'mcp_db_pool_connections', { state: 'in_use' })).toBe(POOL_MAX);
      expect(sample(text, 'mcp_db_pool_connections', { state: 'idle' })).toBe(0);
      expect(sample(text, 'mcp_db_pool_waiting')).toBeGreaterThanOrEqual(1);
    } finally {
      for (const r of held) await r.release();
    }
    const after = await scrape();
    expect(sample(after, 'mcp_db_pool_waiting')).toBe(0);
  });

  it('counts open SSE streams by kind and measures how late logged events reach them', async () => {
    const c = await LegacyClient.open(url);
    const standalone0 = await value('mcp_sse_streams_active', { kind: 'standalone' });
    const lag0 = await value('mcp_notification_delivery_lag_seconds_count', { kind: 'sse' });
    const get = await c.openGetStream();
    expect(get.status).toBe(200);
    await get.next(); // the priming event
    expect(await value('mcp_sse_streams_active', { kind: 'standalone' })).toBe(standalone0 + 1);

    // Task status notifications go through the event log to this stream.
    await c.result('tools/call', { name: 'slow_compute', arguments: { seconds: 0 }, task: {} });
    await get.next();
    expect(await value('mcp_notification_delivery_lag_seconds_count', { kind: 'sse' })).toBeGreaterThan(lag0);

    const stateless0 = await value('mcp_sse_streams_active', { kind: 'stateless' });
    const listen = await openStream(url, {
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
        params: { notifications: { toolsListChanged: true }, _meta: modernMeta(EXT_CAPS) },
      }),
    });
    await listen.next(); // the acknowledgement
    expect(await value('mcp_sse_streams_active', { kind: 'stateless' })).toBe(stateless0 + 1);

    get.close();
    listen.close();
    await waitFor(
      scrape,
      (t) =>
        sample(t, 'mcp_sse_streams_active', { kind: 'standalone' }) === standalone0 &&
        sample(t, 'mcp_sse_streams_active', { kind: 'stateless' }) === stateless0,
      { what: 'the streams to be counted closed' },
    );
  });

  it('counts bus reconnects after the LISTEN connection is killed', async () => {
    const before = await value('mcp_bus_reconnects_total', { result: 'ok' });
    const dbName = new URL(db.url).pathname.slice(1);
    await withClient(db.url, (pg) =>
      pg.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = $1 AND application_name LIKE 'mcp-task-server-listen:%'`,
        [dbName],
      ),
    );
    await waitFor(
      () => value('mcp_bus_reconnects_total', { result: 'ok' }),
      (n) => n >= before + 1,
      { what: 'a counted reconnect' },
    );
  });

  it('janitor lag: the age of the oldest due row per step, back to 0 once swept', async () => {
    const c = await LegacyClient.open(url);
    const live = await c.result('tools/call', {
      name: 'slow_compute',
      arguments: { seconds: 60 },
      task: { ttl: 1000 },
    });
    const done = await c.result('tools/call', {
      name: 'slow_compute',
      arguments: { seconds: 0 },
      task: { ttl: 1000 },
    });
    const ids = [live.task.taskId, done.task.taskId];
    await waitFor(
      () =>
        withClient(db.url, (pg) =>
          pg.query(`SELECT count(*)::int AS n FROM task WHERE id = ANY($1) AND expires_at <= now()`, [ids]),
        ),
      (r) => r.rows[0].n === 2,
      { what: 'both tasks past their ttl' },
    );
    const due = await scrape();
    expect(sample(due, 'mcp_janitor_lag_seconds', { step: 'expire' })).toBeGreaterThan(0);
    expect(sample(due, 'mcp_janitor_lag_seconds', { step: 'delete' })).toBeGreaterThan(0);

    const sweepStarted = Date.now();
    // runOnce joins a scheduled sweep already under way, which may have read before both tasks were due;
    // the second call is a sweep that began after they were.
    await app.get(JanitorService).runOnce();
    await app.get(JanitorService).runOnce();
    const swept = await scrape();
    // Both tasks were due before the sweep and are gone after it.
    const left = await withClient(db.url, (pg) =>
      pg.query(`SELECT count(*)::int AS n FROM task WHERE id = ANY($1)`, [ids]),
    );
    expect(left.rows[0].n).toBe(0);
    // Whatever is due now (a task of an earlier test whose ttl ran out after the sweep began) is younger
    // than the sweep: the lag never goes back beyond it. Exactly 0 would race those rows.
    const sinceSweep = (Date.now() - sweepStarted) / 1000;
    expect(sample(swept, 'mcp_janitor_lag_seconds', { step: 'expire' })).toBeLessThanOrEqual(sinceSweep);
    expect(sample(swept, 'mcp_janitor_lag_seconds', { step: 'delete' })).toBeLessThanOrEqual(sinceSweep);
  });
});
