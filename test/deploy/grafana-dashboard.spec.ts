import { dashboardMetricUses, loadDashboards } from '../support/deploy-files.js';

/**
 * Structure of the Grafana dashboards (no Grafana here: we parse the JSON). Whether each metric exists on
 * the server is checked against a running app's /metrics in test/e2e/metrics-contract.e2e-spec.ts.
 */
describe('deploy/grafana dashboards', () => {
  const dashboards = loadDashboards();

  it('exist and parse', () => {
    expect(dashboards.size).toBeGreaterThan(0);
  });

  it.each([...dashboards])('%s: panels are well-formed and laid out without overlap', (_file, d) => {
    expect(d.uid).toMatch(/^[a-z0-9-]{1,40}$/);
    const ids = d.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const cells = new Set<string>();
    for (const p of d.panels) {
      expect(p.gridPos.x + p.gridPos.w).toBeLessThanOrEqual(24);
      for (let x = p.gridPos.x; x < p.gridPos.x + p.gridPos.w; x++) {
        for (let y = p.gridPos.y; y < p.gridPos.y + p.gridPos.h; y++) {
          const cell = `${x},${y}`;
          if (cells.has(cell)) throw new Error(`panel "${p.title}" overlaps another at ${cell}`);
          cells.add(cell);
        }
      }
      if (p.type === 'row') continue;
      expect(p.targets?.length).toBeGreaterThan(0);
      expect(p.datasource?.uid).toBe('${datasource}');
      for (const t of p.targets ?? []) expect(t.expr.trim()).not.toBe('');
    }
  });

  it('every query selects at least one metric', () => {
    for (const [where, names] of dashboardMetricUses()) {
      if (names.length === 0) throw new Error(`${where}: no metric found in its queries`);
    }
  });

  it('covers what an operator looks at', () => {
    const used = new Set([...dashboardMetricUses().values()].flat());
    const wanted = {
      traffic: 'http_request_duration_seconds_count',
      'latency per method': 'mcp_server_operation_duration_seconds_bucket',
      'tasks by status': 'mcp_tasks_active',
      'task durations': 'mcp_task_duration_seconds_bucket',
      janitor: 'mcp_janitor_last_success_timestamp_seconds',
      rescues: 'mcp_task_rescues_total',
      'auth failures': 'mcp_auth_failures_total',
      'DB pool': 'mcp_db_pool_connections',
      'SSE streams': 'mcp_sse_streams_active',
      // Durable work (issue 22).
      'queue depth': 'mcp_task_queue_depth',
      'queue wait': 'mcp_task_queue_wait_seconds_bucket',
      'claims per instance': 'mcp_task_claims_total',
      'worker slots': 'mcp_task_worker_slots',
      retries: 'mcp_task_retries_total',
      'hand-overs': 'mcp_task_handovers_total',
    };
    const missing = Object.entries(wanted).filter(([, m]) => !used.has(m));
    expect(missing).toEqual([]);
  });
});
