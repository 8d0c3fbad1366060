import { Injectable, Logger } from '@nestjs/common';
import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { AuthFailure, AuthFailureReason, AuthProviderUnavailable } from '../principals.errors.js';
import { isIdentityString } from '../identity-claims.js';
import { errorMessage } from '../../common/error-message.js';
import { PrincipalsConfig } from '../principals.config.js';

const FETCH_TIMEOUT_MS = 5000;

/** Maps a verification error from jose onto the bounded failure reasons. */
function failureFor(err: unknown): AuthFailure {
  if (err instanceof errors.JWTExpired) return new AuthFailure(AuthFailureReason.Expired);
  if (err instanceof errors.JWTClaimValidationFailed) {
    switch (err.claim) {
      case 'nbf':
        return new AuthFailure(AuthFailureReason.NotYetValid);
      case 'iss':
        return new AuthFailure(AuthFailureReason.Issuer);
      case 'aud':
        return new AuthFailure(AuthFailureReason.Audience);
      case 'typ':
        return new AuthFailure(AuthFailureReason.TokenType);
      default:
        return new AuthFailure(AuthFailureReason.Malformed);
    }
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return new AuthFailure(AuthFailureReason.Algorithm);
  if (err instanceof errors.JWSSignatureVerificationFailed)
    return new AuthFailure(AuthFailureReason.Signature);
  if (err instanceof errors.JWKSNoMatchingKey) return new AuthFailure(AuthFailureReason.UnknownKey);
  return new AuthFailure(AuthFailureReason.Malformed);
}

/**
 * Verifies OIDC/OAuth access tokens (JWT) as a resource server: signature against the issuer's JWKS, an
 * allow-list of asymmetric algorithms, `iss`, `aud`, `exp` and `nbf` with a small skew. Keys are cached by
 * jose's remote key set: a token with an unknown `kid` refetches the JWKS, at most once per
 * OIDC_JWKS_COOLDOWN_MS, so a flood of forged kids cannot turn into a flood of requests to the IdP.
 */
@Injectable()
export class OidcVerifier {
  private readonly logger = new Logger(OidcVerifier.name);
  private keySet?: JWTVerifyGetKey;
  private discovery?: Promise<URL>;
  private discoveryFailedAt = 0;

  constructor(private readonly config: PrincipalsConfig) {}

  async verify(token: string): Promise<JWTPayload & { sub: string }> {
    const keys = await this.keys();
    try {
      const { payload } = await jwtVerify(token, keys, {
        issuer: this.config.OIDC_ISSUER,
        audience: this.config.oidcAudiences,
        algorithms: this.config.OIDC_ALGORITHMS,
        clockTolerance: this.config.OIDC_CLOCK_SKEW_S,
        requiredClaims: ['exp', 'sub'],
        // RFC 9068: jose compares case-insensitively and treats `at+jwt` and `application/at+jwt` alike.
        ...(this.config.OIDC_REQUIRED_TYP && { typ: this.config.OIDC_REQUIRED_TYP }),
      });
      // jose checks that `sub` is present, not what it is: 42 or an object would be stringified into an
      // identity, and every object into the same one.
      if (!isIdentityString(payload.sub)) throw new AuthFailure(AuthFailureReason.Malformed);
      return payload as JWTPayload & { sub: string };
    } catch (err) {
      if (err instanceof AuthFailure) throw err;
      if (err instanceof AuthProviderUnavailable) throw err;
      throw failureFor(err);
    }
  }

  private async keys(): Promise<JWTVerifyGetKey> {
    if (this.keySet) return this.keySet;
    const uri = this.config.OIDC_JWKS_URI ? new URL(this.config.OIDC_JWKS_URI) : await this.discoverJwksUri();
    const remote = createRemoteJWKSet(uri, {
      cooldownDuration: this.config.OIDC_JWKS_COOLDOWN_MS,
      cacheMaxAge: this.config.OIDC_JWKS_CACHE_MS,
      timeoutDuration: FETCH_TIMEOUT_MS,
    });
    // A key set that cannot be fetched is the server's problem (503), not a bad token (401).
    this.keySet = async (header, token) => {
      try {
        return await remote(header, token);
      } catch (err) {
        if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys) {
          throw err;
        }
        this.logger.warn(`JWKS ${uri.href} unavailable: ${errorMessage(err)}`);
        throw new AuthProviderUnavailable('the identity provider keys could not be fetched');
      }
    };
    return this.keySet;
  }

  /** OpenID Connect Discovery: jwks_uri from the issuer's metadata, fetched once (retried after a cooldown). */
  private async discoverJwksUri(): Promise<URL> {
    if (!this.discovery) {
      if (Date.now() - this.discoveryFailedAt < this.config.OIDC_JWKS_COOLDOWN_MS) {
        throw new AuthProviderUnavailable('OIDC discovery failed recently; retrying after the cooldown');
      }
      this.discovery = this.fetchDiscovery().catch((err: unknown) => {
        this.discovery = undefined;
        this.discoveryFailedAt = Date.now();
        this.logger.warn(`OIDC discovery failed: ${errorMessage(err)}`);
        throw new AuthProviderUnavailable('OIDC discovery failed');
      });
    }
    return this.discovery;
  }

  private async fetchDiscovery(): Promise<URL> {
    const issuer = this.config.OIDC_ISSUER ?? '';
    const url = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
    const res = await fetch(url, {
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    });
    if (!res.ok) throw new Error(`${url} answered ${res.status}`);
    const doc = (await res.json()) as { issuer?: unknown; jwks_uri?: unknown };
    // OpenID Connect Discovery 1.0 §4.3: the document must name exactly the issuer it was fetched for.
    if (doc.issuer !== issuer)
      throw new Error(`${url} names issuer ${String(doc.issuer)}, expected ${issuer}`);
    if (typeof doc.jwks_uri !== 'string' || !/^https?:\/\//.test(doc.jwks_uri)) {
      throw new Error(`${url} has no usable jwks_uri`);
    }
    this.logger.log(`OIDC discovery: keys at ${doc.jwks_uri}`);
    return new URL(doc.jwks_uri);
  }
}
