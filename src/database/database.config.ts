import { IsIn, IsOptional, IsString, Matches } from 'class-validator';
import { ConfigSection } from '../config/config-section.js';
import { BoolEnv, Env, IntEnv, POSTGRES_URL } from '../config/env.decorators.js';
import { ServerConfig } from '../config/server.config.js';

export const STATEMENT_MODE_SETTINGS = ['auto', 'named', 'unnamed'] as const;
export type StatementModeSetting = (typeof STATEMENT_MODE_SETTINGS)[number];

@ConfigSection<DatabaseConfig>({
  module: 'database',
  summary: 'The PostgreSQL connection pool, migrations and the embedded development server.',
  checks: (c, ctx) =>
    ctx.get(ServerConfig).isProduction && !c.DATABASE_URL
      ? ['DATABASE_URL is required when NODE_ENV=production (the embedded PostgreSQL is for development)']
      : [],
})
export class DatabaseConfig {
  @Env(
    '`postgres://user:pass@host:port/db`. Unset: embedded PostgreSQL (refused when `NODE_ENV=production`)',
    { type: 'postgres:// URL' },
  )
  @IsOptional()
  @Matches(POSTGRES_URL, { message: 'DATABASE_URL must be a postgres:// or postgresql:// URL' })
  DATABASE_URL?: string;

  @Env('where the embedded PostgreSQL keeps its data (`DATA_DIR/pg`) and its generated password', {
    type: 'path',
  })
  @IsString()
  DATA_DIR = './.data';

  @Env('as root on a host without an OS user `postgres`, allow the embedded server to `useradd postgres`')
  @BoolEnv()
  EMBEDDED_PG_CREATE_USER = false;

  @Env('apply pending migrations at boot (under a PostgreSQL advisory lock)')
  @BoolEnv()
  DB_MIGRATIONS_RUN = true;

  @Env(
    'connections in the pool per instance; at least 2, since the boot holds two at once (the migration lock ' +
      'and the migrations, then the statement-mode probe)',
  )
  @IntEnv(2, 200)
  DB_POOL_MAX = 10;

  @Env(
    'how the hot statements are sent: `auto` probes at boot whether the pool keeps named prepared statements ' +
      '(a transaction-mode pooler such as PgBouncer < 1.21 does not) and switches to unnamed ones at the first ' +
      'lost statement, logging the mode; `named` or `unnamed` forces one (see ' +
      '[operations](operations.md#supported-topologies))',
    { type: STATEMENT_MODE_SETTINGS.join(', ') },
  )
  @IsIn(STATEMENT_MODE_SETTINGS, {
    message: `DB_PREPARED_STATEMENTS must be one of ${STATEMENT_MODE_SETTINGS.join(', ')}`,
  })
  DB_PREPARED_STATEMENTS: StatementModeSetting = 'auto';
}
