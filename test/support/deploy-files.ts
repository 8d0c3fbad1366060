import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { metricNamesIn } from './promql.js';
import { REPO_ROOT } from './server-process.js';

export const DEPLOY_DIR = join(REPO_ROOT, 'deploy');

export interface DashboardPanel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: { refId: string; expr: string; datasource?: { uid: string } }[];
}

export interface Dashboard {
  uid: string;
  title: string;
  panels: DashboardPanel[];
  templating: { list: { name: string; type: string; query: unknown }[] };
}

/** Every dashboard JSON under deploy/grafana, by file name. */
export function loadDashboards(): Map<string, Dashboard> {
  const dir = join(DEPLOY_DIR, 'grafana');
  const out = new Map<string, Dashboard>();
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.json'))) {
    out.set(f, JSON.parse(readFileSync(join(dir, f), 'utf8')) as Dashboard);
  }
  return out;
}

/** "<file> / <panel title>" → the metric names its queries select (template variable queries included). */
export function dashboardMetricUses(): Map<string, string[]> {
  const uses = new Map<string, string[]>();
  for (const [file, d] of loadDashboards()) {
    for (const p of d.panels) {
      if (p.type === 'row') continue;
      uses.set(`${file} / ${p.title}`, [...new Set((p.targets ?? []).flatMap((t) => metricNamesIn(t.expr)))]);
    }
    for (const v of d.templating.list) {
      const q = typeof v.query === 'string' ? v.query : (v.query as { query?: string } | undefined)?.query;
      const m = q ? /label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)/.exec(q) : null;
      if (m) uses.set(`${file} / variable ${v.name}`, [m[1]]);
    }
  }
  return uses;
}

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export function loadAlertRules(): AlertRule[] {
  const doc = parse(readFileSync(join(DEPLOY_DIR, 'prometheus', 'alerts.yml'), 'utf8')) as {
    groups: { rules: AlertRule[] }[];
  };
  return doc.groups.flatMap((g) => g.rules);
}

/** "alert <name>" → the metric names its expression selects. */
export function alertMetricUses(): Map<string, string[]> {
  return new Map(loadAlertRules().map((r) => [`alert ${r.alert}`, metricNamesIn(r.expr)]));
}
