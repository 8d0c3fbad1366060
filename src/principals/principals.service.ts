import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { isIdentityString } from './identity-claims.js';
import type { Principal } from './principal.js';
import { AuthFailure, AuthFailureReason } from './principals.errors.js';
import { PrincipalsRepository } from './principals.repository.js';

/** What a strategy learned about the caller, before the stable id is derived and the sighting recorded. */
export interface AuthenticatedIdentity {
  provider: 'oidc' | 'proxy' | 'apikey';
  /** The token issuer (oidc); unset for proxy and apikey. */
  issuer?: string;
  /** The issuer's subject, the proxy's user name, or the API key id. */
  subject: string;
  name?: string;
  email?: string;
  scopes: readonly string[];
  groups: readonly string[];
  /** The team or tenant the caller belongs to (AUTH_TENANT_CLAIM, AUTH_PROXY_TENANT_HEADER); see Principal. */
  tenant?: string;
  /** Epoch ms after which the credential is no longer valid (a token's `exp`). */
  expiresAt?: number;
}

/** A principal's row is rewritten at most this often (per replica, and across replicas by the SQL guard). */
export const LAST_SEEN_INTERVAL_S = 60;
const MAX_REMEMBERED = 10_000;

function digest(parts: string[]): string {
  return createHash('sha256').update(parts.join('\n')).digest().subarray(0, 16).toString('base64url');
}

/**
 * The stable ownership id. OIDC: issuer + subject (the same user under another issuer is someone else);
 * proxy: the user name the proxy asserts; apikey: the public key id. Hashed so that ids have one short shape
 * whatever the issuer URLs or user names look like.
 */
export function principalIdFor(
  identity: Pick<AuthenticatedIdentity, 'provider' | 'issuer' | 'subject'>,
): string {
  switch (identity.provider) {
    case 'oidc':
      return `oidc:${digest([identity.issuer ?? '', identity.subject])}`;
    case 'proxy':
      return `proxy:${digest([identity.subject])}`;
    case 'apikey':
      return `apikey:${identity.subject}`;
  }
}

@Injectable()
export class PrincipalsService {
  /** id -> what was last written, so a busy principal costs no query between refreshes. */
  private readonly lastWritten = new Map<string, { atMs: number; name?: string; email?: string }>();

  constructor(private readonly repo: PrincipalsRepository) {}

  /** Turns an authenticated identity into the Principal put on the request, persisting the sighting. */
  async resolve(identity: AuthenticatedIdentity): Promise<Principal> {
    // The last gate for every strategy: ownership is keyed by these strings, so none may be coerced.
    if (!isIdentityString(identity.subject) || !identity.groups.every(isIdentityString)) {
      throw new AuthFailure(AuthFailureReason.Malformed);
    }
    const principal: Principal = Object.freeze({
      id: principalIdFor(identity),
      provider: identity.provider,
      subject: identity.subject,
      ...(identity.issuer !== undefined && { issuer: identity.issuer }),
      ...(identity.name !== undefined && { name: identity.name }),
      ...(identity.email !== undefined && { email: identity.email }),
      scopes: Object.freeze([...new Set(identity.scopes)]),
      groups: Object.freeze([...new Set(identity.groups)]),
      ...(identity.tenant !== undefined && { tenant: identity.tenant }),
      ...(identity.expiresAt !== undefined && { expiresAt: identity.expiresAt }),
    });
    await this.recordSeen(principal);
    return principal;
  }

  private async recordSeen(p: Principal): Promise<void> {
    const now = Date.now();
    const last = this.lastWritten.get(p.id);
    const unchanged =
      last !== undefined &&
      (p.name === undefined || p.name === last.name) &&
      (p.email === undefined || p.email === last.email);
    if (unchanged && now - last.atMs < LAST_SEEN_INTERVAL_S * 1000) return;
    await this.repo.recordSeen(
      {
        id: p.id,
        provider: p.provider,
        issuer: p.issuer ?? null,
        subject: p.subject,
        displayName: p.name,
        email: p.email,
      },
      LAST_SEEN_INTERVAL_S,
    );
    if (this.lastWritten.size >= MAX_REMEMBERED) this.lastWritten.clear();
    this.lastWritten.set(p.id, { atMs: now, name: p.name ?? last?.name, email: p.email ?? last?.email });
  }
}
