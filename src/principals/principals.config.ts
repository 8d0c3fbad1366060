import { Transform } from 'class-transformer';
import { IsIn, IsOptional, Matches, MinLength } from 'class-validator';
import { ConfigSection, type ConfigContext } from '../config/config-section.js';
import {
  Env,
  HEADER_NAME,
  HTTP_URL,
  IntEnv,
  ListEnv,
  toHeaderName,
  toList,
} from '../config/env.decorators.js';
import { isLoopbackHost, ServerConfig } from '../config/server.config.js';

export const AUTH_PROVIDER_NAMES = ['oidc', 'proxy', 'apikey'] as const;
export type AuthProviderName = (typeof AUTH_PROVIDER_NAMES)[number];

/** Asymmetric JWS algorithms only: `none` and HMAC (a shared secret) can never verify an access token here. */
export const ASYMMETRIC_JWT_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;

function isPlainHttpOffLoopback(url: string | undefined): boolean {
  if (!url) return false;
  try {
    const u = new URL(url);
    return u.protocol === 'http:' && !isLoopbackHost(u.hostname);
  } catch {
    return false; // the schema already reported a malformed URL
  }
}

/** Rules that involve more than one variable; each problem names the variables to set. */
function principalsProblems(c: PrincipalsConfig, ctx: ConfigContext): string[] {
  const problems: string[] = [];
  if (c.hasAuthProvider('oidc')) {
    if (!c.OIDC_ISSUER) problems.push('OIDC_ISSUER is required when AUTH_PROVIDERS includes oidc');
    if (!c.MCP_RESOURCE_URL) {
      problems.push(
        'MCP_RESOURCE_URL is required when AUTH_PROVIDERS includes oidc (the resource tokens are issued for)',
      );
    }
  }
  if (c.hasAuthProvider('proxy') && !c.AUTH_PROXY_SECRET) {
    problems.push('AUTH_PROXY_SECRET is required when AUTH_PROVIDERS includes proxy');
  }
  const server = ctx.get(ServerConfig);
  return server.isProduction ? problems.concat(productionProblems(c, server.HOST)) : problems;
}

/**
 * NODE_ENV=production refuses settings that are fine on a laptop and unsafe on a network. All of them are
 * reported together with the rest, so an operator fixes a deployment in one round.
 */
function productionProblems(c: PrincipalsConfig, host: string): string[] {
  const problems: string[] = [];
  if (c.AUTH_PROVIDERS.length === 0 && !isLoopbackHost(host)) {
    problems.push(
      `AUTH_PROVIDERS must name at least one of oidc, proxy, apikey when NODE_ENV=production and HOST=${host} ` +
        'is not a loopback address (the anonymous principal is for development only)',
    );
  }
  if (!c.MCP_RESOURCE_URL) {
    problems.push(
      'MCP_RESOURCE_URL is required when NODE_ENV=production (the RFC 9728 document and 401 challenges must ' +
        'not be derived from the Host header)',
    );
  }
  if (isPlainHttpOffLoopback(c.OIDC_ISSUER)) {
    problems.push('OIDC_ISSUER must be an https URL when NODE_ENV=production (http only on loopback)');
  }
  if (isPlainHttpOffLoopback(c.OIDC_JWKS_URI)) {
    problems.push('OIDC_JWKS_URI must be an https URL when NODE_ENV=production (http only on loopback)');
  }
  if (c.OIDC_JWKS_COOLDOWN_MS === 0) {
    problems.push(
      'OIDC_JWKS_COOLDOWN_MS must not be 0 when NODE_ENV=production (every unknown kid would fetch the JWKS)',
    );
  }
  return problems;
}

@ConfigSection<PrincipalsConfig>({
  module: 'principals',
  summary: 'Authentication: the providers, OIDC access tokens, the SSO proxy, scopes.',
  checks: principalsProblems,
})
export class PrincipalsConfig {
  @Env(
    'comma list of `oidc`, `proxy`, `apikey`. Empty: every request is the anonymous development principal ' +
      '(loud warning; refused when `NODE_ENV=production` and `HOST` is not loopback)',
    { type: 'comma list' },
  )
  @Transform(toList)
  @IsIn(AUTH_PROVIDER_NAMES, {
    each: true,
    message: `AUTH_PROVIDERS must be a comma list of ${AUTH_PROVIDER_NAMES.join(', ')}`,
  })
  AUTH_PROVIDERS: AuthProviderName[] = [];

  @Env(
    'canonical URL of the `/mcp` endpoint as clients use it (`https://mcp.example.com/mcp`): the `resource` ' +
      'of RFC 9728, the default token audience, and where challenges point. Required with `oidc` and when ' +
      "`NODE_ENV=production`; unset otherwise (development): derived from the request's Host",
    { type: 'http(s) URL' },
  )
  @IsOptional()
  @Matches(HTTP_URL, { message: 'MCP_RESOURCE_URL must be an http(s) URL without query or fragment' })
  MCP_RESOURCE_URL?: string;

  @Env("issuer URL, exactly as in the tokens' `iss` (required with `oidc`)", { type: 'http(s) URL' })
  @IsOptional()
  @Matches(HTTP_URL, { message: 'OIDC_ISSUER must be an http(s) URL without query or fragment' })
  OIDC_ISSUER?: string;

  @Env("the issuer's JWKS; unset: discovered once from `OIDC_ISSUER/.well-known/openid-configuration`", {
    type: 'http(s) URL',
  })
  @IsOptional()
  @Matches(/^https?:\/\/\S+$/, { message: 'OIDC_JWKS_URI must be an http(s) URL' })
  OIDC_JWKS_URI?: string;

  @Env("comma list of accepted `aud` values (a token's `aud` must contain one)", {
    default: '`MCP_RESOURCE_URL`',
  })
  @ListEnv()
  OIDC_AUDIENCE: string[] = [];

  @Env('accepted JWS algorithms; asymmetric only (`none` and `HS*` are refused at boot)', {
    type: 'comma list',
  })
  @Transform(toList)
  @IsIn(ASYMMETRIC_JWT_ALGORITHMS, {
    each: true,
    message: `OIDC_ALGORITHMS must be a comma list of ${ASYMMETRIC_JWT_ALGORITHMS.join(', ')} (never none or HS*)`,
  })
  // Ed25519 is the newer name of an EdDSA curve; the default keeps the registered names only.
  OIDC_ALGORITHMS: string[] = ASYMMETRIC_JWT_ALGORITHMS.filter((a) => a !== 'Ed25519');

  @Env('tolerance on `exp` and `nbf`, in seconds')
  @IntEnv(0, 300)
  OIDC_CLOCK_SKEW_S = 60;

  @Env(
    '`at+jwt`: accept only RFC 9068 access tokens (JOSE `typ` `at+jwt` or `application/at+jwt`, any case); an ' +
      'ID token or a token without `typ` gets 401 `invalid_token` ' +
      '(`mcp_auth_failures_total{reason="token_type"}`). Unset: `typ` is not checked',
    { type: 'at+jwt' },
  )
  @IsOptional()
  @Transform(({ value }: { value: unknown }) =>
    typeof value === 'string'
      ? value
          .trim()
          .toLowerCase()
          .replace(/^application\//, '')
      : value,
  )
  @IsIn(['at+jwt'], { message: 'OIDC_REQUIRED_TYP must be at+jwt (RFC 9068) or unset' })
  OIDC_REQUIRED_TYP?: 'at+jwt';

  @Env(
    'least time between two JWKS fetches caused by an unknown `kid` (key rotation; forged kids cannot flood ' +
      'the IdP)',
  )
  @IntEnv(0, 3600000)
  OIDC_JWKS_COOLDOWN_MS = 30000;

  @Env(
    'token claim naming the team or tenant of the caller (fair sharing of task workers with ' +
      '`TASK_FAIR_SHARE=tenant`); empty: none',
  )
  @IsOptional()
  @Matches(/^[A-Za-z0-9_.:/-]{1,128}$/, { message: 'AUTH_TENANT_CLAIM must be a claim name' })
  AUTH_TENANT_CLAIM?: string;

  @Env('how long fetched keys are used before the JWKS is fetched again')
  @IntEnv(1000, 86400000)
  OIDC_JWKS_CACHE_MS = 600000;

  @Env('header with the user the proxy authenticated', { type: 'header name' })
  @Transform(toHeaderName)
  @Matches(HEADER_NAME, { message: 'AUTH_PROXY_USER_HEADER must be an HTTP header name' })
  AUTH_PROXY_USER_HEADER = 'x-forwarded-user';

  @Env('optional email header', { type: 'header name' })
  @Transform(toHeaderName)
  @Matches(HEADER_NAME, { message: 'AUTH_PROXY_EMAIL_HEADER must be an HTTP header name' })
  AUTH_PROXY_EMAIL_HEADER = 'x-forwarded-email';

  @Env(
    'optional header naming the team or tenant of the user (fair sharing of task workers with ' +
      '`TASK_FAIR_SHARE=tenant`); empty: none',
    { type: 'header name' },
  )
  @IsOptional()
  @Transform(toHeaderName)
  @Matches(HEADER_NAME, { message: 'AUTH_PROXY_TENANT_HEADER must be an HTTP header name' })
  AUTH_PROXY_TENANT_HEADER?: string;

  @Env('optional comma-separated groups header', { type: 'header name' })
  @Transform(toHeaderName)
  @Matches(HEADER_NAME, { message: 'AUTH_PROXY_GROUPS_HEADER must be an HTTP header name' })
  AUTH_PROXY_GROUPS_HEADER = 'x-forwarded-groups';

  @Env(
    'shared secret the SSO proxy sends in `x-auth-proxy-secret` (≥ 16 characters; required with `proxy`); ' +
      'without it proxy headers are not trusted',
    { type: 'secret' },
  )
  @IsOptional()
  @MinLength(16, { message: 'AUTH_PROXY_SECRET must be at least 16 characters' })
  AUTH_PROXY_SECRET?: string;

  @Env('scopes every proxy-authenticated principal holds (a proxy passes no OAuth scopes)')
  @ListEnv()
  AUTH_PROXY_SCOPES: string[] = [];

  @Env(
    '`scopes_supported` of the RFC 9728 document; also the `scope` of 401 challenges when ' +
      '`AUTH_REQUIRED_SCOPES` is empty',
  )
  @ListEnv()
  AUTH_SCOPES_SUPPORTED: string[] = [];

  @Env('scopes every `/mcp` request needs; a principal without them gets 403 `insufficient_scope`')
  @ListEnv()
  AUTH_REQUIRED_SCOPES: string[] = [];

  hasAuthProvider(name: AuthProviderName): boolean {
    return this.AUTH_PROVIDERS.includes(name);
  }

  /** The `aud` values an OIDC access token may carry: OIDC_AUDIENCE, or else MCP_RESOURCE_URL. */
  get oidcAudiences(): string[] {
    if (this.OIDC_AUDIENCE.length > 0) return this.OIDC_AUDIENCE;
    return this.MCP_RESOURCE_URL ? [this.MCP_RESOURCE_URL] : [];
  }
}
