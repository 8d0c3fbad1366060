import { IsOptional, IsString, Matches } from 'class-validator';
import { ConfigSection } from '../config/config-section.js';
import { Env, IntEnv } from '../config/env.decorators.js';

/**
 * The JSON-RPC layer: the shape every JSON body must keep (checked on its bytes before it is parsed: far
 * above what real clients send, low enough that parsing, validating and serialising stay cheap; a body
 * beyond one is refused with -32602, HTTP 400, naming the variable), MRTR requestState, list caching.
 */
@ConfigSection<ProtocolConfig>({
  module: 'protocol',
  summary:
    'JSON-RPC bodies (their shape is checked on the bytes before parsing; beyond a limit: -32602, HTTP 400, ' +
    'naming the variable), MRTR `requestState`, list caching hints.',
})
export class ProtocolConfig {
  @Env('deepest nesting of objects and arrays in a JSON body')
  @IntEnv(8, 10000)
  JSON_MAX_DEPTH = 64;

  @Env('most keys in any one object of a JSON body')
  @IntEnv(16, 10000000)
  JSON_MAX_OBJECT_KEYS = 1000;

  @Env('most values (objects, arrays, strings, numbers, booleans, nulls) in one JSON body')
  @IntEnv(1000, 100000000)
  JSON_MAX_NODES = 100000;

  @Env(
    'HMAC key of MRTR `requestState` (≥ 32 characters). Set it, identically, on every instance behind a load ' +
      'balancer',
    { type: 'secret', default: 'random per process' },
  )
  @IsOptional()
  @IsString()
  @Matches(/^.{32,}$/, { message: 'MRTR_STATE_SECRET must be at least 32 characters' })
  MRTR_STATE_SECRET?: string;

  @Env('lifetime of an issued `requestState`')
  @IntEnv(1000, 86400000)
  MRTR_STATE_TTL_MS = 10 * 60 * 1000;

  @Env('`ttlMs` caching hint on list and read results (2026-07-28)')
  @IntEnv(0, 86400000)
  LIST_CACHE_TTL_MS = 60000;
}
