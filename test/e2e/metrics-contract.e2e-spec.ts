import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { LifecycleService } from '../../src/lifecycle/lifecycle.service.js';
import { alertMetricUses, dashboardMetricUses } from '../support/deploy-files.js';
import { exposedMetricNames } from '../support/promql.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/**
 * The dashboards and alert rules may only query metrics the server really exposes: the names come from a
 * running app's /metrics (TYPE lines included, so labelled counters that have not counted yet still count),
 * never from a list kept in the test. A renamed or removed metric fails here with the panels that use it.
 */
describe('dashboards and alerts against the metrics a running server exposes', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let exposed: Set<string>;

  beforeAll(async () => {
    db = await createTestDatabase('metrics_contract');
    app = await createTestApp(db.url);
    const res = await request(app.getHttpServer()).get('/metrics').expect(200);
    exposed = exposedMetricNames(res.text);
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('every dashboard panel queries only exposed metrics', () => {
    const broken = [...dashboardMetricUses()]
      .map(([where, names]) => [where, names.filter((n) => !exposed.has(n))] as const)
      .filter(([, missing]) => missing.length > 0)
      .map(([where, missing]) => `${where}: ${missing.join(', ')}`);
    expect(broken).toEqual([]);
  });

  it('every alert rule queries only exposed metrics (or the series Prometheus adds to every scrape)', () => {
    // `up` is written by Prometheus for each scrape, never by the target: the liveness rules need it.
    const scrapeSeries = new Set(['up']);
    const broken = [...alertMetricUses()]
      .map(([where, names]) => [where, names.filter((n) => !exposed.has(n) && !scrapeSeries.has(n))] as const)
      .filter(([, missing]) => missing.length > 0)
      .map(([where, missing]) => `${where}: ${missing.join(', ')}`);
    expect(broken).toEqual([]);
  });

  it('exposes the task queue metrics the alert rules, dashboard and runbook are written against (issue 22)', async () => {
    const text = (await request(app.getHttpServer()).get('/metrics').expect(200)).text;
    const type = (name: string): string | undefined =>
      new RegExp(`^# TYPE ${name} (\\S+)$`, 'm').exec(text)?.[1];
    expect({
      depth: type('mcp_task_queue_depth'),
      wait: type('mcp_task_queue_wait_seconds'),
      claims: type('mcp_task_claims_total'),
      started: type('mcp_task_runs_started_total'),
      slots: type('mcp_task_worker_slots'),
    }).toEqual({ depth: 'gauge', wait: 'histogram', claims: 'counter', started: 'counter', slots: 'gauge' });
    // Every label value exists from boot (at 0 where nothing happened yet), so rate() and alerts see it.
    expect(text).toMatch(/^mcp_task_queue_depth\{state="ready"\} 0$/m);
    expect(text).toMatch(/^mcp_task_queue_depth\{state="delayed"\} 0$/m);
    expect(text).toMatch(/^mcp_task_claims_total 0$/m);
    expect(text).toMatch(/^mcp_task_worker_slots\{state="busy"\} 0$/m);
    // TASK_WORKER_CONCURRENCY's default: 16 free slots on an idle instance of the default role.
    expect(text).toMatch(/^mcp_task_worker_slots\{state="free"\} 16$/m);
    expect(text).toMatch(/^mcp_task_runs_started_total\{tool="[^"]+"\} 0$/m);
  });

  it('counts readiness changes as the probes see them (the flapping alert reads this)', async () => {
    const http = request(app.getHttpServer());
    const sample = async (name: string): Promise<number> => {
      const text = (await http.get('/metrics').expect(200)).text;
      const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
      if (!m) throw new Error(`${name} not in /metrics`);
      return Number(m[1]);
    };
    await http.get('/health/ready').expect(200);
    expect(await sample('mcp_ready')).toBe(1);
    await http.get('/health/ready').expect(200);
    expect(await sample('mcp_readiness_changes_total')).toBe(0);

    app.get(LifecycleService).beginDrain();
    await http.get('/health/ready').expect(503);
    expect(await sample('mcp_ready')).toBe(0);
    expect(await sample('mcp_readiness_changes_total')).toBe(1);
    await http.get('/health/ready').expect(503);
    expect(await sample('mcp_readiness_changes_total')).toBe(1);
  });
});
