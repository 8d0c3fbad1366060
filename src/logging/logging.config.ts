import { IsIn } from 'class-validator';
import { ConfigSection } from '../config/config-section.js';
import { Env } from '../config/env.decorators.js';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'log', 'debug', 'verbose'] as const;
export type LogLevelName = (typeof LOG_LEVELS)[number];

@ConfigSection<LoggingConfig>({ module: 'logging', summary: 'Log lines.' })
export class LoggingConfig {
  @Env('`fatal`, `error`, `warn`, `log`, `debug` (adds one access line per request), `verbose`', {
    type: LOG_LEVELS.join(', '),
  })
  @IsIn(LOG_LEVELS, { message: `LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}` })
  LOG_LEVEL: LogLevelName = 'log';
}
