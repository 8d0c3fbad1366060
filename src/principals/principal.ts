/**
 * Who is calling. Every session, task, SSE replay and subscription is bound to `id`; a tool sees this object
 * (never the raw token). `id` is stable for a subject: issuer + subject for OIDC, provider + key id for API keys.
 */
export interface Principal {
  /** Stable, opaque id used for ownership checks (never shown to other principals). */
  readonly id: string;
  readonly provider: 'oidc' | 'proxy' | 'apikey' | 'anonymous';
  readonly subject: string;
  readonly issuer?: string;
  readonly name?: string;
  readonly email?: string;
  readonly scopes: readonly string[];
  readonly groups: readonly string[];
  /** When the credential stops being valid (epoch ms; a token's `exp`); streams it opened close then. */
  readonly expiresAt?: number;
}

/** The development principal used when no auth provider is configured. */
export const ANONYMOUS_PRINCIPAL: Principal = Object.freeze({
  id: 'anonymous:dev',
  provider: 'anonymous',
  subject: 'dev',
  name: 'Anonymous developer',
  scopes: Object.freeze([]),
  groups: Object.freeze([]),
});

/** Where the HTTP edge keeps the authenticated principal on the request. */
export interface RequestWithPrincipal {
  principal?: Principal;
  /**
   * Set by the auth guard when a provider authenticated the request: whether its credential still holds
   * (not expired, not revoked). SSE streams opened by the request ask it at every keep-alive.
   */
  credentialValid?: () => Promise<boolean>;
}
