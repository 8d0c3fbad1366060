import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { DEPLOY_DIR, loadAlertRules } from '../support/deploy-files.js';
import { REPO_ROOT } from '../support/server-process.js';

/**
 * promtool checks and unit-tests the rules themselves (`npm run test:rules`, run by .ci/run). This suite
 * keeps the files honest with each other: every alert has a promtool test that fires it, a severity, and a
 * runbook section in docs/operations.md that its annotation points at.
 */
describe('deploy/prometheus alert rules', () => {
  const rules = loadAlertRules();
  const tests = parse(readFileSync(join(DEPLOY_DIR, 'prometheus', 'alerts.test.yml'), 'utf8')) as {
    tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
  };
  const docs = readFileSync(join(REPO_ROOT, 'docs', 'operations.md'), 'utf8');

  it('has unique alert names and the issue-listed alerts', () => {
    const names = rules.map((r) => r.alert);
    expect(new Set(names).size).toBe(names.length);
    for (const wanted of [
      'McpJanitorStalled',
      'McpTaskRescuesRising',
      'McpStaleCompletionsRising',
      'McpTaskFailureRatioHigh',
      'McpAuthFailureSpike',
      'McpReadinessFlapping',
      'McpDbPoolSaturated',
      'McpNotificationLagHigh',
      // A dead or unscraped instance exports nothing; only rules on the scrape itself can fire then.
      'McpInstanceDown',
      'McpNoInstanceUp',
      'McpMetricsAbsent',
      // Durable work (issue 22): a queue nobody drains, retry budgets running out, rescues that lose work.
      'McpTaskQueueBacklogGrowing',
      'McpTaskRetriesExhaustedRising',
      'McpTaskRescuesFailing',
    ]) {
      expect(names).toContain(wanted);
    }
  });

  it.each(rules.map((r) => [r.alert, r]))(
    '%s has a firing and a quiet promtool case, and a runbook',
    (name, rule) => {
      const cases = tests.tests.flatMap((t) => t.alert_rule_test).filter((c) => c.alertname === name);
      expect(cases.some((c) => c.exp_alerts.length > 0)).toBe(true);
      expect(cases.some((c) => c.exp_alerts.length === 0)).toBe(true);
      expect(['warning', 'critical']).toContain(rule.labels?.severity);
      const anchor = `alert-${name.toLowerCase()}`;
      expect(rule.annotations?.runbook).toBe(`docs/operations.md#${anchor}`);
      // The runbook heading is "### <AlertName>" (GitHub anchors it as the lower-cased name) under an explicit anchor.
      expect(docs).toContain(`<a id="${anchor}"></a>`);
    },
  );
});
