import { Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { constantTimeEqual } from '../../common/constant-time.js';
import type { Principal } from '../principal.js';
import { isIdentityString } from '../identity-claims.js';
import { AuthFailure, AuthFailureReason } from '../principals.errors.js';
import { PrincipalsService } from '../principals.service.js';
import { AuthStrategy, headerValue } from './request-strategy.js';
import { PrincipalsConfig } from '../principals.config.js';

/** The header in which the SSO proxy proves it is the proxy. */
export const PROXY_SECRET_HEADER = 'x-auth-proxy-secret';
const MAX_HEADER_LENGTH = 1024;

/** How many times the header was sent (headersDistinct keeps repeats apart). */
function headerCount(req: Request, name: string): number {
  return req.headersDistinct[name.toLowerCase()]?.length ?? 0;
}

/**
 * An SSO proxy in front (oauth2-proxy and the like) authenticated the user and passes who it is in headers.
 * Those headers are trusted only when the request also carries AUTH_PROXY_SECRET, so a client that reaches
 * the service directly cannot claim to be anyone.
 */
@Injectable()
export class ProxyStrategy extends AuthStrategy('proxy') {
  constructor(
    private readonly principals: PrincipalsService,
    private readonly config: PrincipalsConfig,
  ) {
    super();
  }

  async validate(req: Request): Promise<Principal> {
    const user = headerValue(req, this.config.AUTH_PROXY_USER_HEADER);
    if (user === undefined) throw new AuthFailure(AuthFailureReason.Missing);
    const secret = headerValue(req, PROXY_SECRET_HEADER);
    if (secret === undefined || !constantTimeEqual(secret, this.config.AUTH_PROXY_SECRET ?? '')) {
      throw new AuthFailure(AuthFailureReason.UntrustedProxy);
    }
    // Node joins a repeated header with ", ": two user headers would become one made-up name that both
    // (or neither) of them own. The proxy must send exactly one.
    if (!isIdentityString(user) || headerCount(req, this.config.AUTH_PROXY_USER_HEADER) !== 1) {
      throw new AuthFailure(AuthFailureReason.Malformed);
    }
    const email = headerValue(req, this.config.AUTH_PROXY_EMAIL_HEADER);
    const groups = headerValue(req, this.config.AUTH_PROXY_GROUPS_HEADER);
    const tenant = this.config.AUTH_PROXY_TENANT_HEADER
      ? headerValue(req, this.config.AUTH_PROXY_TENANT_HEADER)
      : undefined;
    return this.principals.resolve({
      provider: 'proxy',
      subject: user,
      name: user,
      email: email && email.length <= MAX_HEADER_LENGTH ? email : undefined,
      scopes: this.config.AUTH_PROXY_SCOPES,
      groups: (groups ?? '')
        .split(',')
        .map((g) => g.trim())
        .filter(isIdentityString),
      ...(isIdentityString(tenant) && tenant.length <= MAX_HEADER_LENGTH && { tenant }),
    });
  }
}
