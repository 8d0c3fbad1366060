// Shared by the benchmarks: scratch databases on a PostgreSQL server, and percentile summaries.
import pg from 'pg';

/** Runs one statement on the server's `postgres` database (CREATE / DROP DATABASE). */
export async function admin(serverUrl, sql) {
  const u = new URL(serverUrl);
  u.pathname = '/postgres';
  const c = new pg.Client({ connectionString: u.toString() });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

export function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export function summary(label, ms, digits = 2) {
  const s = [...ms].sort((a, b) => a - b);
  const f = (v) => v.toFixed(digits);
  return `${label}: n=${s.length} p50=${f(pct(s, 50))} ms p95=${f(pct(s, 95))} ms p99=${f(pct(s, 99))} ms max=${f(s[s.length - 1])} ms`;
}
