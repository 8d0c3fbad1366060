import { ConfigSection } from '../config/config-section.js';
import { Env, IntEnv } from '../config/env.decorators.js';

@ConfigSection<SessionsConfig>({
  module: 'sessions',
  summary: 'Legacy sessions (`Mcp-Session-Id`), their event log and their requests to the client.',
})
export class SessionsConfig {
  @Env('a legacy session unused this long ends (then 404)')
  @IntEnv(1000, 604800000)
  SESSION_IDLE_TTL_MS = 30 * 60 * 1000;

  @Env(
    'sessions an instance keeps in memory between requests (re-read after 5 s, dropped everywhere on any ' +
      'change; a DELETE, a log level or a subscription change waits until every live instance dropped it, at ' +
      "most `BUS_HEARTBEAT_TIMEOUT_MS`; ignored while this instance's LISTEN connection is not healthy); `0` " +
      'reads the database on every request',
  )
  @IntEnv(0, 1000000)
  SESSION_CACHE_MAX = 10000;

  @Env('logged SSE events older than this are deleted (and ended sessions with them)')
  @IntEnv(1000, 604800000)
  SSE_EVENT_TTL_MS = 60 * 60 * 1000;

  @Env("how long a handler waits for the client's answer to elicitation, sampling or roots (legacy era)")
  @IntEnv(1000, 3600000)
  CLIENT_REQUEST_TIMEOUT_MS = 5 * 60 * 1000;
}
