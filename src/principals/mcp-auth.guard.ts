import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { Request, Response } from 'express';
import { AuditTrail } from '../audit/audit-trail.service.js';
import { AuthChallenges, requiredScopesMissing } from './auth-challenges.js';
import { setRequestPrincipal } from '../logging/request-context.js';
import { CredentialWatch } from './credential-watch.service.js';
import { ANONYMOUS_PRINCIPAL, type RequestWithPrincipal } from './principal.js';
import { PrincipalsConfig } from './principals.config.js';
import { RequestAuthenticator } from './request-authenticator.js';

/**
 * Put on the /mcp controller (`@UseGuards(McpAuthGuard)`). Authenticates the request with the active
 * providers and sets `req.principal`; without providers it sets the anonymous development principal.
 * Failure: 401 with an RFC 6750/9728 challenge (and a count in mcp_auth_failures_total); a principal without
 * AUTH_REQUIRED_SCOPES: 403 insufficient_scope, and an `auth.scope_refused` audit row (recordSoon: never
 * awaited, coalesced under a flood); identity provider unreachable: 503.
 */
@Injectable()
export class McpAuthGuard implements CanActivate {
  constructor(
    private readonly config: PrincipalsConfig,
    private readonly authenticator: RequestAuthenticator,
    private readonly challenges: AuthChallenges,
    private readonly credentials: CredentialWatch,
    private readonly audit: AuditTrail,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const http = context.switchToHttp();
    const req = http.getRequest<Request & RequestWithPrincipal>();
    const res = http.getResponse<Response>();
    if (!this.authenticator.enabled) {
      req.principal = ANONYMOUS_PRINCIPAL;
      setRequestPrincipal(ANONYMOUS_PRINCIPAL.id);
      return true;
    }
    const principal = await this.authenticator.authenticate(req, res);
    const missing = requiredScopesMissing(principal, this.config.AUTH_REQUIRED_SCOPES);
    if (missing.length > 0) {
      this.audit.recordSoon({
        kind: 'auth.scope_refused',
        // The caller, as for a tool's refusal (the request's principal is only set once it is let in).
        actor: 'owner',
        principal: principal.id,
        detail: { missing, route: `${req.method} ${req.baseUrl}${req.path}` },
      });
      throw this.challenges.reject(res, this.challenges.insufficientScope(req, []));
    }
    req.principal = principal;
    setRequestPrincipal(principal.id);
    req.credentialValid = () => this.credentials.stillValid(principal);
    return true;
  }
}
