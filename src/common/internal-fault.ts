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

/** The id a client quotes to an operator: the request's correlation id, or a fresh one outside a request. */
export function correlationId(): string {
  return currentRequestId() ?? randomUUID();
}

/** What a client sees instead of an infrastructure error's text. */
export function internalErrorText(id: string): string {
  return `Internal error (correlation id ${id})`;
}
