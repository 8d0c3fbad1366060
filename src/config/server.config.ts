import { IsIn, IsString, Matches } from 'class-validator';
import { ConfigSection } from './config-section.js';
import { Env, IntEnv, ListEnv } from './env.decorators.js';

const LOOPBACK_HOSTS = new Set(['localhost', '::1', '[::1]']);

/** Whether a host name or address only ever reaches this machine. */
export function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase();
  return LOOPBACK_HOSTS.has(h) || h.endsWith('.localhost') || /^127(\.\d{1,3}){3}$/.test(h);
}

/** The HTTP server itself and the deployment posture every module's checks consult (NODE_ENV). */
@ConfigSection<ServerConfig>({
  module: 'server',
  summary: 'The HTTP server: where it listens and what it accepts.',
})
export class ServerConfig {
  @Env('HTTP port (0 picks a free one; the log says which)')
  @IntEnv(0, 65535)
  PORT = 3000;

  @Env('bind address; `0.0.0.0` in containers', { type: 'host name or IP address' })
  @IsString()
  @Matches(/^[A-Za-z0-9.:[\]-]+$/, { message: 'HOST must be a host name or IP address' })
  HOST = '127.0.0.1';

  @Env(
    '`production` switches to JSON log lines and refuses unsafe settings at boot (see the *Production checklist*)',
    { type: 'development, production or test' },
  )
  @IsIn(['development', 'production', 'test'], {
    message: 'NODE_ENV must be one of development, production, test',
  })
  NODE_ENV: 'development' | 'production' | 'test' = 'development';

  @Env('largest accepted request body (`b`, `kb`, `mb`); larger → 413', { type: 'size' })
  @Matches(/^\d+(\.\d+)?\s*(b|kb|mb)?$/i, {
    message: 'HTTP_BODY_LIMIT must be a size such as 4mb, 512kb or 1048576',
  })
  HTTP_BODY_LIMIT = '4mb';

  @Env('comma list of browser origins allowed by CORS; empty keeps CORS off')
  @ListEnv()
  @Matches(/^https?:\/\/[^\s/]+$/, {
    each: true,
    message: 'CORS_ORIGINS must be a comma list of http(s) origins',
  })
  CORS_ORIGINS: string[] = [];

  get isProduction(): boolean {
    return this.NODE_ENV === 'production';
  }

  /** HTTP_BODY_LIMIT in bytes. */
  get bodyLimitBytes(): number {
    const m = /^(\d+(?:\.\d+)?)\s*(b|kb|mb)?$/i.exec(this.HTTP_BODY_LIMIT);
    if (!m) return 4 * 1024 * 1024;
    const unit = (m[2] ?? 'b').toLowerCase();
    const mult = unit === 'mb' ? 1024 * 1024 : unit === 'kb' ? 1024 : 1;
    return Math.floor(Number(m[1]) * mult);
  }
}
