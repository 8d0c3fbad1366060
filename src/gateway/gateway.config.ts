import { ConfigSection } from '../config/config-section.js';
import { Env, IntEnv, ListEnv } from '../config/env.decorators.js';

@ConfigSection<GatewayConfig>({
  module: 'gateway',
  summary: 'The Streamable HTTP edge: SSE streams, Host and Origin checks.',
})
export class GatewayConfig {
  @Env('events kept per SSE stream for replay with `Last-Event-ID`')
  @IntEnv(10, 100000)
  SSE_STREAM_RETENTION = 1000;

  @Env(
    "interval of `: keep-alive` comments on open SSE streams (at most 15 s); each one first re-checks the stream's " +
      'credential (expired token, revoked API key → the stream closes)',
  )
  @IntEnv(1000, 15000)
  SSE_KEEPALIVE_MS = 15000;

  @Env('the `retry:` hint sent in priming events')
  @IntEnv(0, 60000)
  SSE_RETRY_MS = 1000;

  @Env(
    'Host values (with optional :port) accepted on `/mcp`. Empty: `localhost`, `127.0.0.1` and `[::1]` only ' +
      'when `HOST` is loopback, any otherwise',
  )
  @ListEnv()
  MCP_ALLOWED_HOSTS: string[] = [];

  @Env('browser Origins accepted on `/mcp`. Empty: loopback origins when `HOST` is loopback, none otherwise')
  @ListEnv()
  MCP_ALLOWED_ORIGINS: string[] = [];
}
