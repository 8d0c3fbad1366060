import {
  ForbiddenException,
  Injectable,
  NotFoundException,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import type { Request, Response } from 'express';
import { setRequestPrincipal } from '../logging/request-context.js';
import type { Principal, RequestWithPrincipal } from '../principals/principal.js';
import { RequestAuthenticator } from '../principals/request-authenticator.js';
import { AdminConfig } from './admin.config.js';
import { AdminCsrf } from './admin-csrf.js';
import { AdminRefusals } from './admin-refusals.js';

/** Whether `p` is a console admin: it holds ADMIN_SCOPE, or is in one of ADMIN_GROUPS. */
export function isAdmin(p: Principal, config: AdminConfig): boolean {
  if (p.provider === 'anonymous') return false;
  if (config.ADMIN_SCOPE !== undefined && p.scopes.includes(config.ADMIN_SCOPE)) return true;
  return p.groups.some((g) => config.ADMIN_GROUPS.includes(g));
}

/**
 * On every /admin route (pages, actions, assets). Authenticates with the same providers as /mcp (an OIDC
 * token, the SSO proxy's headers, an API key): none → 401 with the same challenge as /mcp. A principal that
 * is not an admin → 403 and an `admin.refused` audit row (AdminRefusals bounds them). A POST must also pass
 * the CSRF checks (AdminCsrf) → else 403. Sets `req.principal` to the admin.
 */
@Injectable()
export class AdminGuard implements CanActivate {
  constructor(
    private readonly config: AdminConfig,
    private readonly authenticator: RequestAuthenticator,
    private readonly refusals: AdminRefusals,
    private readonly csrf: AdminCsrf,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const http = context.switchToHttp();
    const req = http.getRequest<Request & RequestWithPrincipal>();
    const res = http.getResponse<Response>();
    // The module serves no routes without providers (admin.config.ts); this keeps the guard safe alone.
    if (!this.authenticator.enabled) throw new NotFoundException();
    const principal = await this.authenticator.authenticate(req, res);
    if (!isAdmin(principal, this.config)) {
      const route = (req.route as { path?: string } | undefined)?.path ?? 'unmatched';
      this.refusals.note(principal.id, req.method, route);
      throw new ForbiddenException('This principal is not a console admin (ADMIN_SCOPE / ADMIN_GROUPS).');
    }
    req.principal = principal;
    setRequestPrincipal(principal.id);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      const refusal = this.csrf.refusal(req, principal.id);
      if (refusal) throw new ForbiddenException(`CSRF check failed: ${refusal}.`);
    }
    return true;
  }
}
