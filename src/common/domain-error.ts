/**
 * The base of every domain error: a code from its module's own enum and a message meant for the caller,
 * nothing of the wire. A feature says how its errors look on the wire (JSON-RPC code, HTTP status) in its
 * `*.error-mapper.ts`, registered with `registerErrorMapper` (common/error-mappers.ts); the protocol edge
 * (protocol/error-mapping.ts) applies it, once.
 */
export abstract class DomainError<C extends string = string> extends Error {
  constructor(
    readonly code: C,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}
