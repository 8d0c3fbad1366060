import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { ToolRegistry } from '../tool-dispatch/tool-registry.service.js';
import { PgProxy } from '../../test/support/pg-proxy.js';
import { createTestApp } from '../../test/support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/test-database.js';

/** Every series of one metric in Prometheus text: labels → value. */
function series(text: string, name: string): { labels: Record<string, string>; value: number }[] {
  const out: { labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[k] = v;
    out.push({ labels, value: Number(m[3]) });
  }
  return out;
}

const has = (text: string, name: string, labels: Record<string, string>, value: number): boolean =>
  series(text, name).some(
    (s) =>
      s.value === value &&
      Object.keys(s.labels).length === Object.keys(labels).length &&
      Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );

/**
 * What a scrape of a freshly booted instance shows before anything happened: every counter at 0 for every
 * label value the instance can know (so increase() sees the first event, as the alert rules need), readiness
 * as of the scrape (not of the last probe), and no stale values from the database while it is unreachable.
 */
describe('metrics of a fresh instance (real app, real PostgreSQL behind a proxy)', () => {
  let db: TestDatabase;
  let proxy: PgProxy;
  let app: INestApplication;
  const scrape = async (): Promise<string> =>
    (await request(app.getHttpServer()).get('/metrics').expect(200)).text;

  beforeAll(async () => {
    db = await createTestDatabase('initial_series');
    proxy = await PgProxy.start(db.url);
    app = await createTestApp(proxy.via(db.url), { JANITOR_ENABLED: 'false' });
  });
  afterAll(async () => {
    await app.close();
    await proxy.close();
    await db.drop();
  });

  it('has every counter series at 0 from boot, for every registered tool', async () => {
    const text = await scrape();
    const tools = app
      .get(ToolRegistry)
      .listTools()
      .map((t) => t.name);
    expect(tools.length).toBeGreaterThan(0);
    const missing: string[] = [];
    const expect0 = (name: string, labels: Record<string, string>): void => {
      if (!has(text, name, labels, 0)) missing.push(`${name}${JSON.stringify(labels)}`);
    };
    for (const tool of tools) {
      for (const outcome of ['requeued', 'failed']) expect0('mcp_task_rescues_total', { tool, outcome });
      expect0('mcp_task_handovers_total', { tool });
      for (const status of ['completed', 'failed', 'cancelled', 'expired'])
        expect0('mcp_tasks_finished_total', { tool, status });
      for (const mode of ['immediate', 'escalated']) expect0('mcp_tasks_created_total', { tool, mode });
      expect0('mcp_task_stale_completions_total', { tool });
    }
    for (const op of ['complete', 'fail', 'park']) {
      expect0('mcp_task_write_failures_total', { op });
      expect0('mcp_task_write_retries_total', { op });
    }
    for (const kind of ['create', 'finish']) expect0('mcp_task_commit_group_fallbacks_total', { kind });
    for (const result of ['ok', 'skipped', 'error']) expect0('mcp_janitor_runs_total', { result });
    for (const action of ['expire', 'lease_lapsed', 'instance_gone', 'delete'])
      expect0('mcp_janitor_rows_total', { action });
    expect(missing).toEqual([]);
  });

  it('reports readiness as of the scrape, without a probe, and drops database-read gauges in an outage', async () => {
    // Nothing has called /health/ready: the gauge still says ready (it used to say -1 until a probe came).
    const before = await scrape();
    expect(series(before, 'mcp_ready')).toEqual([{ labels: {}, value: 1 }]);
    expect(series(before, 'mcp_tasks_active').length).toBeGreaterThan(0);
    expect(series(before, 'mcp_janitor_lag_seconds').length).toBe(2);

    proxy.refuse(() => true);
    proxy.cut(() => true);
    try {
      // Past the readiness cache, the scrape itself finds the database gone.
      await new Promise((r) => setTimeout(r, 1100));
      const during = await scrape();
      expect(series(during, 'mcp_ready')).toEqual([{ labels: {}, value: 0 }]);
      // No reading, no series: the last values from before the outage are not served as current.
      expect(series(during, 'mcp_tasks_active')).toEqual([]);
      expect(series(during, 'mcp_janitor_lag_seconds')).toEqual([]);
    } finally {
      proxy.refuse(undefined);
    }
    const t0 = Date.now();
    let after = '';
    while (Date.now() - t0 < 15_000) {
      after = await scrape();
      if (series(after, 'mcp_ready')[0]?.value === 1 && series(after, 'mcp_tasks_active').length > 0) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(series(after, 'mcp_ready')).toEqual([{ labels: {}, value: 1 }]);
    expect(series(after, 'mcp_tasks_active').length).toBeGreaterThan(0);
  });
});
