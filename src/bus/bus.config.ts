import { IsOptional, Matches } from 'class-validator';
import { ConfigSection } from '../config/config-section.js';
import { Env, IntEnv, POSTGRES_URL } from '../config/env.decorators.js';

@ConfigSection<BusConfig>({
  module: 'bus',
  summary: 'The LISTEN/NOTIFY connection that carries notifications between instances.',
})
export class BusConfig {
  @Env(
    'direct URL for the one LISTEN connection per instance; set it when `DATABASE_URL` goes through PgBouncer ' +
      'in transaction mode (see [operations](operations.md#supported-topologies))',
    { type: 'postgres:// URL', default: '`DATABASE_URL`' },
  )
  @IsOptional()
  @Matches(POSTGRES_URL, { message: 'DATABASE_LISTEN_URL must be a postgres:// or postgresql:// URL' })
  DATABASE_LISTEN_URL?: string;

  @Env('how often the LISTEN connection proves itself with a self-NOTIFY round trip')
  @IntEnv(200, 600000)
  BUS_HEARTBEAT_MS = 5000;

  @Env(
    'longest that round trip may take; longer fails readiness and reconnects (setting up a new LISTEN ' +
      'connection may take this or 10 s, whichever is longer)',
  )
  @IntEnv(100, 60000)
  BUS_HEARTBEAT_TIMEOUT_MS = 3000;

  @Env('idle time before TCP keepalive probes start on the LISTEN connection')
  @IntEnv(1000, 600000)
  BUS_TCP_KEEPALIVE_MS = 10000;
}
