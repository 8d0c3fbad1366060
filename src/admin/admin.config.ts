import { IsIn, IsOptional, Matches, MaxLength, MinLength } from 'class-validator';
import { ConfigSection, type ConfigContext } from '../config/config-section.js';
import { Env, ListEnv } from '../config/env.decorators.js';
import { ServerConfig } from '../config/server.config.js';
import { PrincipalsConfig } from '../principals/principals.config.js';

export const ADMIN_CONSOLE_MODES = ['auto', 'on', 'off'] as const;
export type AdminConsoleMode = (typeof ADMIN_CONSOLE_MODES)[number];

/** Whether the console is served, and why not when it is not (for the boot warning). */
export interface AdminConsoleState {
  enabled: boolean;
  reason: string;
}

/**
 * A console nobody can be admitted to is useless, and one anybody is admitted to is a hole: so it is on only
 * when some authentication provider is active AND an admin credential (a scope or a group) is named.
 */
export function adminConsoleState(admin: AdminConfig, principals: PrincipalsConfig): AdminConsoleState {
  if (admin.ADMIN_CONSOLE === 'off') return { enabled: false, reason: 'ADMIN_CONSOLE=off' };
  const credential = admin.ADMIN_SCOPE !== undefined || admin.ADMIN_GROUPS.length > 0;
  if (principals.AUTH_PROVIDERS.length === 0) {
    return { enabled: false, reason: 'AUTH_PROVIDERS is empty (nobody can be authenticated as an admin)' };
  }
  if (!credential) {
    return { enabled: false, reason: 'neither ADMIN_SCOPE nor ADMIN_GROUPS is set (no admin credential)' };
  }
  return {
    enabled: true,
    reason: admin.ADMIN_CONSOLE === 'on' ? 'ADMIN_CONSOLE=on' : 'an admin credential is set',
  };
}

function adminProblems(c: AdminConfig, ctx: ConfigContext): string[] {
  if (c.ADMIN_CONSOLE !== 'on' || !ctx.get(ServerConfig).isProduction) return [];
  const state = adminConsoleState(c, ctx.get(PrincipalsConfig));
  return state.enabled
    ? []
    : [
        `ADMIN_CONSOLE=on needs an admin credential when NODE_ENV=production: ${state.reason}; set ` +
          'ADMIN_SCOPE or ADMIN_GROUPS with an active AUTH_PROVIDERS, or ADMIN_CONSOLE=auto|off',
      ];
}

@ConfigSection<AdminConfig>({
  module: 'admin',
  summary: 'The operator web console at `/admin` (operations.md, Console).',
  checks: adminProblems,
})
export class AdminConfig {
  @Env(
    '`auto`: served when an admin credential (`ADMIN_SCOPE` or `ADMIN_GROUPS`) and an auth provider are ' +
      'configured; `on`: the same, but without one the boot is refused when `NODE_ENV=production` (elsewhere ' +
      'the console stays off with a warning); `off`: never served (`/admin` is 404)',
    { type: ADMIN_CONSOLE_MODES.join(', ') },
  )
  @IsIn(ADMIN_CONSOLE_MODES, { message: `ADMIN_CONSOLE must be one of ${ADMIN_CONSOLE_MODES.join(', ')}` })
  ADMIN_CONSOLE: AdminConsoleMode = 'auto';

  @Env(
    'scope that makes a principal a console admin (`mcp:admin`, say): an OIDC token scope, an API key ' +
      'created with it (`apikey create --scopes mcp:admin`), or `AUTH_PROXY_SCOPES` for every proxy user',
  )
  @IsOptional()
  @Matches(/^[\x21\x23-\x5b\x5d-\x7e]{1,128}$/, { message: 'ADMIN_SCOPE must be one OAuth scope token' })
  ADMIN_SCOPE?: string;

  @Env('comma list of groups (OIDC `groups` claim, SSO proxy groups header) whose members are console admins')
  @ListEnv()
  ADMIN_GROUPS: string[] = [];

  @Env(
    "key of the console forms' CSRF tokens (32 to 512 characters). Unset: a random key per process, so a " +
      'form loaded from one instance fails on another: set it when more than one instance serves `/admin`',
    { type: 'secret' },
  )
  @IsOptional()
  @MinLength(32, { message: 'ADMIN_CSRF_SECRET must be at least 32 characters' })
  @MaxLength(512, { message: 'ADMIN_CSRF_SECRET must be at most 512 characters' })
  ADMIN_CSRF_SECRET?: string;
}
