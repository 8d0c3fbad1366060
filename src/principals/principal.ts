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
  /**
   * The team or tenant the credential names (a token claim, AUTH_TENANT_CLAIM; a proxy header,
   * AUTH_PROXY_TENANT_HEADER): with TASK_FAIR_SHARE=tenant, its many service accounts share one share of the
   * task workers. Never used for ownership.
   */
  readonly tenant?: string;
  /** When the credential stops being valid (epoch ms; a token's `exp`); streams it opened close then. */
  readonly expiresAt?: number;
}

const PROVIDERS: readonly Principal['provider'][] = ['oidc', 'proxy', 'apikey', 'anonymous'];

/**
 * The principal as a task keeps it (task.principal), so a run claimed on another instance calls the tool as
 * the caller that created it: who it is and what it may do, never a credential or its expiry.
 */
export function storedPrincipal(p: Principal): Record<string, unknown> {
  return {
    id: p.id,
    provider: p.provider,
    subject: p.subject,
    ...(p.issuer === undefined ? {} : { issuer: p.issuer }),
    ...(p.name === undefined ? {} : { name: p.name }),
    ...(p.email === undefined ? {} : { email: p.email }),
    ...(p.tenant === undefined ? {} : { tenant: p.tenant }),
    scopes: [...p.scopes],
    groups: [...p.groups],
  };
}

/** A stored principal read back; null when the value is not one (then the caller falls back to the owner id). */
export function principalFromStored(v: unknown): Principal | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
  const r = v as Record<string, unknown>;
  const strings = (x: unknown): x is string[] => Array.isArray(x) && x.every((s) => typeof s === 'string');
  const provider = r.provider as Principal['provider'];
  if (typeof r.id !== 'string' || typeof r.subject !== 'string' || !PROVIDERS.includes(provider)) return null;
  if (!strings(r.scopes) || !strings(r.groups)) return null;
  const optional = (k: string): Record<string, string> => (typeof r[k] === 'string' ? { [k]: r[k] } : {});
  return {
    id: r.id,
    provider,
    subject: r.subject,
    ...optional('issuer'),
    ...optional('name'),
    ...optional('email'),
    ...optional('tenant'),
    scopes: r.scopes,
    groups: r.groups,
  };
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
