/** SQLSTATEs meaning "the server gave up waiting": statement_timeout, lock_timeout, a cancel request. */
const TIMEOUT_STATES = new Set(['57014', '55P03']);
/** Node socket errors meaning the database cannot be reached at all. */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'ETIMEDOUT',
  'EPIPE',
]);

function codeOf(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { code?: unknown; driverError?: unknown };
  if (typeof e.code === 'string') return e.code;
  return e.driverError === undefined ? undefined : codeOf(e.driverError);
}

/**
 * A short, fixed reason for a failed readiness probe. Driver messages name hosts, databases and roles; they
 * go to the log, never into the public /health/ready body.
 */
export function probeFailureReason(err: unknown): 'timeout' | 'unavailable' | 'failed' {
  const code = codeOf(err);
  if (code !== undefined) {
    if (TIMEOUT_STATES.has(code)) return 'timeout';
    // Class 08: connection exception; 57P0x: shutting down / cannot connect now; 3D000: no such database;
    // class 53: out of connections, memory or disk.
    if (UNREACHABLE.has(code) || /^(08|53)/.test(code) || /^57P0/.test(code) || code === '3D000') {
      return 'unavailable';
    }
  }
  const message = err instanceof Error ? err.message : '';
  if (/Connection terminated|connection timeout|timeout exceeded when trying to connect/i.test(message)) {
    return 'unavailable';
  }
  return 'failed';
}
