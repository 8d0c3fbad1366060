import type { DomainError } from './domain-error.js';

/** The protocol era a refusal is answered in: legacy (2025-11-25) or modern (2026-07-28). */
export type RefusalEra = 'legacy' | 'modern';

/** How a domain error looks on the wire: a JSON-RPC error and the HTTP status of its answer (200 unless said). */
export interface WireRefusal {
  code: number;
  message: string;
  data?: unknown;
  httpStatus?: number;
}

/** A feature's mapping of its own error class; `undefined` leaves the error to the edge's catch-all. */
export type ErrorMapper<E extends DomainError> = (err: E, era: RefusalEra) => WireRefusal | undefined;

type ErrorClass<E extends DomainError> = abstract new (...args: never[]) => E;

/**
 * Error mappers by the domain error class they map. Design: each feature owns its wire mapping in a
 * `<feature>.error-mapper.ts` beside its `*.errors.ts`, and its Nest module registers it in `onModuleInit`
 * (`registerErrorMapper(TaskError, mapTaskError)`); the protocol edge (`mapError` in
 * protocol/error-mapping.ts) looks the error's class up here, walking its prototype chain. So protocol/
 * imports no feature, features import no protocol/ code, and the mapping still happens in one place, once.
 * Keyed by class, registration is idempotent: several applications in one process (tests) register the
 * same mapper again harmlessly. A module-scope map rather than a provider, because `mapError` is a plain
 * function called from code that has no injector at hand.
 */
const mappers = new Map<ErrorClass<DomainError>, ErrorMapper<DomainError>>();

export function registerErrorMapper<E extends DomainError>(
  type: ErrorClass<E>,
  mapper: ErrorMapper<E>,
): void {
  mappers.set(type, mapper as ErrorMapper<DomainError>);
}

/** The mapper registered for the error's class or its nearest registered ancestor. */
export function errorMapperFor(err: DomainError): ErrorMapper<DomainError> | undefined {
  for (
    let p = Object.getPrototypeOf(err) as object | null;
    p !== null && p !== Error.prototype;
    p = Object.getPrototypeOf(p) as object | null
  ) {
    const mapper = mappers.get((p as { constructor: ErrorClass<DomainError> }).constructor);
    if (mapper) return mapper;
  }
  return undefined;
}
