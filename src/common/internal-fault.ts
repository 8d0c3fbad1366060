import { randomUUID } from 'node:crypto';
import { currentRequestId } from '../logging/request-context.js';

const SQLSTATE = /^[0-9A-Z]{5}$/;
/** Messages of pg and pg-pool errors that carry no class or code of their own. */
const POOL_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Cannot use a pool after calling end|Client was closed/i;

function constructorNames(err: object): string[] {
  const names: string[] = [];
  for (
    let p = Object.getPrototypeOf(err) as object | null;
    p && names.length < 10;
    p = Object.getPrototypeOf(p) as object | null
  ) {
    const name = (p as { constructor?: { name?: unknown } }).constructor?.name;
    if (typeof name === 'string') names.push(name);
  }
  return names;
}

/**
 * Whether an error comes from the infrastructure (PostgreSQL, the driver, TypeORM, a socket) rather than
 * from code that meant to tell the caller something. Its text names tables, constraints, hosts and roles, so
 * it never reaches a client: only a generic message with a correlation id does, and the log has the rest.
 * Recognised by shape, so that no module above the repositories needs to import TypeORM or pg.
 */
export function isInfrastructureFault(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as {
    code?: unknown;
    severity?: unknown;
    driverError?: unknown;
    syscall?: unknown;
    errno?: unknown;
  };
  // pg's DatabaseError: a SQLSTATE plus a severity.
  if (typeof e.code === 'string' && SQLSTATE.test(e.code) && typeof e.severity === 'string') return true;
  // TypeORM's QueryFailedError and every other TypeORMError.
  if (e.driverError !== undefined || constructorNames(err).includes('TypeORMError')) return true;
  // Node system errors (ECONNREFUSED, EPIPE, ...).
  if (typeof e.syscall === 'string' || typeof e.errno === 'number') return true;
  return err instanceof Error && POOL_MESSAGES.test(err.message);
}

/**
 * SQLSTATEs that mean "PostgreSQL cannot serve right now", not "this statement is wrong": connection
 * exceptions, shutdown, too many connections, a read-only server (25006: a hot standby the address still
 * leads to after a failover, "cannot execute ... in a read-only transaction" or "... during recovery"; the
 * connection is retired, see database/read-only-connections.ts), and faults the same request would not hit
 * again: a deadlock or serialization failure (rolled back; a standby's recovery conflict is 40001 too), a
 * prepared statement a transaction pooler put on another server connection (26000, 42P05; refused before it
 * ran).
 */
const UNAVAILABLE_SQLSTATE = /^(08...|57P0[1-3]|53300|25006|40001|40P01|26000|42P05)$/;
const UNAVAILABLE_SYSCALL_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
]);

/**
 * Whether an infrastructure fault is the database being out of reach (restart, failover, cut connection,
 * connection limit) rather than a failing statement: the client may retry, on this or another instance, so it
 * gets HTTP 503 with Retry-After instead of a JSON-RPC error it would take as final.
 */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (typeof err !== 'object' || err === null || depth > 3) return false;
  const e = err as { code?: unknown; severity?: unknown; driverError?: unknown; syscall?: unknown };
  if (typeof e.code === 'string') {
    if (typeof e.severity === 'string' && UNAVAILABLE_SQLSTATE.test(e.code)) return true;
    if (UNAVAILABLE_SYSCALL_CODES.has(e.code)) return true;
  }
  if (e.driverError !== undefined) return isDatabaseUnavailable(e.driverError, depth + 1);
  return err instanceof Error && POOL_MESSAGES.test(err.message);
}

let lastRetryableFault = Number.NEGATIVE_INFINITY;

/** Records that a request just failed with a fault a retry can cure (readiness reports it for a while). */
export function noteRetryableFault(): void {
  lastRetryableFault = performance.now();
}

/** Milliseconds since the last retryable fault (Infinity when none yet), on the monotonic clock. */
export function msSinceRetryableFault(): number {
  return performance.now() - lastRetryableFault;
}

/** The id a client quotes to an operator: the request's correlation id, or a fresh one outside a request. */
export function correlationId(): string {
  return currentRequestId() ?? randomUUID();
}

/** What a client sees instead of an infrastructure error's text. */
export function internalErrorText(id: string): string {
  return `Internal error (correlation id ${id})`;
}
