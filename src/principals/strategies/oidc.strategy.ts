import { Injectable } from '@nestjs/common';
import type { Request } from 'express';
import type { JWTPayload } from 'jose';
import { looksLikeApiKey } from '../api-keys.service.js';
import type { Principal } from '../principal.js';
import { groupNames, isIdentityString } from '../identity-claims.js';
import { AuthFailure, AuthFailureReason } from '../principals.errors.js';
import { PrincipalsService } from '../principals.service.js';
import { OidcVerifier } from './oidc-verifier.js';
import { AuthStrategy, bearerToken } from './request-strategy.js';
import { PrincipalsConfig } from '../principals.config.js';

function stringClaim(payload: JWTPayload, ...names: string[]): string | undefined {
  for (const name of names) {
    const v = payload[name];
    if (typeof v === 'string' && v.trim() !== '') return v;
  }
  return undefined;
}

function listClaim(value: unknown): string[] {
  if (typeof value === 'string') return value.split(' ').filter((s) => s !== '');
  if (Array.isArray(value)) return value.filter((s): s is string => typeof s === 'string' && s !== '');
  return [];
}

/** Scopes from `scope` (RFC 8693/9068: space-separated) and `scp` (Okta: array; Entra ID: space-separated). */
export function scopesOf(payload: JWTPayload): string[] {
  return [...listClaim(payload.scope), ...listClaim(payload.scp)];
}

/** OAuth 2.1 resource server: a JWT access token from OIDC_ISSUER in `Authorization: Bearer`. */
@Injectable()
export class OidcStrategy extends AuthStrategy('oidc') {
  constructor(
    private readonly verifier: OidcVerifier,
    private readonly principals: PrincipalsService,
    private readonly config: PrincipalsConfig,
  ) {
    super();
  }

  async validate(req: Request): Promise<Principal> {
    const token = bearerToken(req);
    if (token === undefined) throw new AuthFailure(AuthFailureReason.Missing);
    // Our own API keys are the apikey strategy's to judge; a JWT is never shaped like one.
    if (looksLikeApiKey(token)) throw new AuthFailure(AuthFailureReason.Malformed, false);
    const payload = await this.verifier.verify(token);
    // Entra ID app roles and Keycloak/Okta groups both describe membership, not OAuth scopes. A group is a
    // whole name (never split on spaces as scopes are); a claim that holds anything else refuses the token.
    const groups = groupNames(payload.groups);
    const roles = groupNames(payload.roles);
    if (groups === null || roles === null) throw new AuthFailure(AuthFailureReason.Malformed);
    return this.principals.resolve({
      provider: 'oidc',
      issuer: this.config.OIDC_ISSUER,
      subject: payload.sub,
      name: stringClaim(payload, 'name', 'preferred_username', 'nickname'),
      email: stringClaim(payload, 'email'),
      scopes: scopesOf(payload),
      groups: [...(groups ?? []), ...(roles ?? [])],
      ...tenantOf(this.config.AUTH_TENANT_CLAIM ? payload[this.config.AUTH_TENANT_CLAIM] : undefined),
      // `exp` is a required claim; streams opened with this token close once it has passed.
      ...(typeof payload.exp === 'number' && { expiresAt: payload.exp * 1000 }),
    });
  }
}

/** The tenant claim when it names one (an identity string); a claim of another shape is ignored, not trusted. */
function tenantOf(value: unknown): { tenant?: string } {
  return isIdentityString(value) ? { tenant: value } : {};
}
