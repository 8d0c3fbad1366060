import { createHash } from 'node:crypto';
import { canonicalJson } from '../../protocol/canonical-json.js';
import type { Params } from './task-params.js';

/**
 * What makes a repeat of a keyed tools/call "the same call": the tool and its arguments, canonically
 * serialised (keys sorted) and hashed. Not the ttl a legacy client asks for, not `_meta` (protocol version,
 * capabilities, progress token change between honest retries), not MRTR answers.
 */
export function idempotencyRequestHash(p: Params): string {
  const call = { name: p.name, arguments: p.arguments ?? {} };
  return createHash('sha256').update(canonicalJson(call)).digest('hex');
}
