import { exposedMetricNames, metricNamesIn } from './promql.js';

describe('metricNamesIn', () => {
  it('finds the metric under aggregations, functions, matchers and ranges', () => {
    expect(
      metricNamesIn(
        'histogram_quantile(0.95, sum by (le, mcp_method_name) (rate(mcp_server_operation_duration_seconds_bucket{job=~"$job",error_type!=""}[$__rate_interval])))',
      ),
    ).toEqual(['mcp_server_operation_duration_seconds_bucket']);
  });

  it('finds both sides of binary operations and ignores keywords, numbers and durations', () => {
    expect(
      metricNamesIn(
        `sum by (job) (rate(a_total{status=~"failed|expired"}[10m])) / sum by (job) (rate(a_total[10m])) > 0.2
         and on (job) sum without (instance) (increase(b_total[10m] offset 5m)) >= 10 or vector(0)`,
      ),
    ).toEqual(['a_total', 'b_total']);
    expect(metricNamesIn('time() - max(mcp_janitor_last_success_timestamp_seconds) > 600')).toEqual([
      'mcp_janitor_last_success_timestamp_seconds',
    ]);
  });

  it('keeps a bare selector and ignores label values that look like names', () => {
    expect(metricNamesIn('mcp_ready == 0')).toEqual(['mcp_ready']);
    expect(metricNamesIn('sum(x{state="in_use"}) / sum(y) * 100')).toEqual(['x', 'y']);
  });
});

describe('exposedMetricNames', () => {
  it('expands histograms and keeps labelled counters that have no samples yet', () => {
    const names = exposedMetricNames(
      [
        '# HELP h_seconds A histogram.',
        '# TYPE h_seconds histogram',
        'h_seconds_bucket{le="1"} 0',
        '# TYPE c_total counter',
        '# TYPE g gauge',
        'g 1',
      ].join('\n'),
    );
    expect([...names].sort()).toEqual([
      'c_total',
      'g',
      'h_seconds',
      'h_seconds_bucket',
      'h_seconds_count',
      'h_seconds_sum',
    ]);
  });
});
