import { IsOptional, MaxLength, MinLength } from 'class-validator';
import { ConfigSection } from '../config/config-section.js';
import { BoolEnv, Env } from '../config/env.decorators.js';
import { ServerConfig } from '../config/server.config.js';

@ConfigSection<MetricsConfig>({
  module: 'metrics',
  summary: 'Access to `GET /metrics`.',
  checks: (c, ctx) =>
    ctx.get(ServerConfig).isProduction && !c.METRICS_TOKEN && !c.METRICS_PUBLIC
      ? [
          'METRICS_TOKEN is required when NODE_ENV=production (or set METRICS_PUBLIC=true to serve /metrics openly)',
        ]
      : [],
})
export class MetricsConfig {
  @Env(
    'when set (16 to 512 characters), `GET /metrics` needs `Authorization: Bearer <METRICS_TOKEN>`; required ' +
      'when `NODE_ENV=production` unless `METRICS_PUBLIC=true`',
    { type: 'secret' },
  )
  @IsOptional()
  @MinLength(16, { message: 'METRICS_TOKEN must be at least 16 characters' })
  @MaxLength(512, { message: 'METRICS_TOKEN must be at most 512 characters' })
  METRICS_TOKEN?: string;

  @Env(
    '`true` lets production serve `/metrics` without `METRICS_TOKEN` (a scraper on a private network); no ' +
      'effect elsewhere',
  )
  @BoolEnv()
  METRICS_PUBLIC = false;
}
