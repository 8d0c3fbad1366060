/**
 * Just enough PromQL reading to list the metric names an expression selects: enough to check that
 * dashboards and alert rules only query metrics the server exposes. It drops what cannot be a metric name
 * (strings, label matchers, range and subquery brackets, grouping label lists, function calls, keywords,
 * numbers, durations, Grafana variables) and keeps the remaining identifiers.
 */
const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'atan2',
  // aggregation operators (followed by a parenthesis or by a grouping clause)
  'sum',
  'min',
  'max',
  'avg',
  'count',
  'stddev',
  'stdvar',
  'topk',
  'bottomk',
  'quantile',
  'count_values',
  'group',
  'inf',
  'nan',
]);

export function metricNamesIn(expr: string): string[] {
  let s = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ') // strings
    .replace(/\{[^}]*\}/g, ' ') // label matchers
    .replace(/\[[^\]]*\]/g, ' ') // ranges and subqueries
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ') // grouping labels
    .replace(/\boffset\s+-?[0-9a-z]+/gi, ' ')
    .replace(/\$\{?[A-Za-z_][A-Za-z0-9_]*\}?/g, ' '); // Grafana variables outside matchers
  s = s.replace(/[A-Za-z_:][A-Za-z0-9_:]*\s*\(/g, '('); // function and aggregation calls
  const names = new Set<string>();
  for (const m of s.matchAll(/(?<![A-Za-z0-9_:.])[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    if (!KEYWORDS.has(m[0].toLowerCase())) names.add(m[0]);
  }
  return [...names].sort();
}

/**
 * Every series name a Prometheus text exposition can produce, from its `# TYPE` lines (a labelled counter
 * that was never incremented has a TYPE line but no sample) plus the sample lines themselves.
 */
export function exposedMetricNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type) {
      const [, name, kind] = type;
      names.add(name);
      if (kind === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name + s);
      if (kind === 'summary') for (const s of ['_sum', '_count']) names.add(name + s);
      continue;
    }
    const sample = /^([A-Za-z_:][A-Za-z0-9_:]*)[{ ]/.exec(line);
    if (sample) names.add(sample[1]);
  }
  return names;
}
