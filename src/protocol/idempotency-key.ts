import { ProtocolError } from './protocol.errors.js';

/**
 * The request header a client names a retry-safe task creation with (the IETF httpapi draft
 * "The Idempotency-Key HTTP Header Field"). Read on POST /mcp in both eras; only a tools/call that creates a
 * task uses it (see docs/tasks.md, Idempotency keys).
 */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';

/** Longest key accepted, in characters (the column is text; the bound keeps the unique index small). */
export const IDEMPOTENCY_KEY_MAX = 255;

/** 1..255 visible ASCII characters (0x21-0x7E): no spaces, so two headers joined by Node ("a, b") fail too. */
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;

/**
 * The request's Idempotency-Key, or undefined without one. A malformed one is the client's error, answered
 * -32602 naming the header (HTTP 400), never silently ignored: a client that sent a key relies on it.
 */
export function idempotencyKeyOf(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  if (raw.length === 0 || raw.length > IDEMPOTENCY_KEY_MAX || !VISIBLE_ASCII.test(raw)) {
    throw ProtocolError.invalidParams(
      `${IDEMPOTENCY_KEY_HEADER} header must be 1 to ${IDEMPOTENCY_KEY_MAX} visible ASCII characters ` +
        '(0x21-0x7E, no spaces; send it once)',
      { header: IDEMPOTENCY_KEY_HEADER },
      400,
    );
  }
  return raw;
}
