import { DomainError } from '../common/domain-error.js';

/**
 * Why a request could not be authenticated. A bounded set: it is the `reason` label of
 * `mcp_auth_failures_total`, so never add values derived from input.
 */
export enum AuthFailureReason {
  /** No credential this server accepts was presented. */
  Missing = 'missing',
  Expired = 'expired',
  NotYetValid = 'not_yet_valid',
  Audience = 'audience',
  Issuer = 'issuer',
  Signature = 'signature',
  Algorithm = 'algorithm',
  Malformed = 'malformed',
  /** Proxy identity headers without the shared proxy secret. */
  UntrustedProxy = 'untrusted_proxy',
  /** A JWT `kid` absent from the issuer's JWKS, or an API key id (or secret) that matches no key. */
  UnknownKey = 'unknown_key',
  RevokedKey = 'revoked_key',
  /** OIDC_REQUIRED_TYP is set and the JWT's `typ` header is not that (an ID token, say). */
  TokenType = 'token_type',
}

export const AUTH_FAILURE_REASONS: readonly AuthFailureReason[] = Object.values(AuthFailureReason);

const DESCRIPTIONS: Record<AuthFailureReason, string> = {
  [AuthFailureReason.Missing]: 'Authentication required',
  [AuthFailureReason.Expired]: 'The access token expired',
  [AuthFailureReason.NotYetValid]: 'The access token is not valid yet',
  [AuthFailureReason.Audience]: 'The access token was not issued for this resource',
  [AuthFailureReason.Issuer]: 'The access token comes from an untrusted issuer',
  [AuthFailureReason.Signature]: 'The access token signature does not verify',
  [AuthFailureReason.Algorithm]: 'The access token uses a signing algorithm this server does not accept',
  [AuthFailureReason.Malformed]: 'The access token is malformed',
  [AuthFailureReason.UntrustedProxy]: 'Identity headers from an untrusted proxy',
  [AuthFailureReason.UnknownKey]: 'The token or key is not known to this server',
  [AuthFailureReason.RevokedKey]: 'The API key was revoked',
  [AuthFailureReason.TokenType]: 'The token is not an access token of the required type',
};

/**
 * A credential was presented and refused (or none was presented). `recognized` tells the guard the strategy
 * owned the credential (a JWT for oidc, an `mcpk_` key for apikey, identity headers for proxy), so its
 * reason wins over another strategy's "missing".
 */
export class AuthFailure extends DomainError<AuthFailureReason> {
  constructor(
    reason: AuthFailureReason,
    readonly recognized = reason !== AuthFailureReason.Missing,
  ) {
    super(reason, DESCRIPTIONS[reason]);
  }

  get reason(): AuthFailureReason {
    return this.code;
  }
}

/** The identity provider could not be consulted (JWKS or discovery unreachable): not the caller's fault. */
export class AuthProviderUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AuthProviderUnavailable';
  }
}
