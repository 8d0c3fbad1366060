import { Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { createHmac, randomBytes } from 'node:crypto';
import { constantTimeEqual } from '../common/constant-time.js';
import { AdminConfig } from './admin.config.js';

/** The hidden form field every console form carries. */
export const CSRF_FIELD = '_csrf';

/**
 * CSRF defence of the console's forms, two checks on every POST:
 * 1. a synchronizer token: an HMAC of the principal id under ADMIN_CSRF_SECRET (or a per-process key), in a
 *    hidden field. Another site cannot read a console page, so it cannot know the token.
 * 2. same origin: `Sec-Fetch-Site` (when the browser sends it) must be `same-origin`, and `Origin` (when sent)
 *    must name this host.
 * Why both: the console's credential is whatever the browser sends by itself (the SSO proxy's cookie, from
 * which the proxy makes the identity headers), which is exactly what a forged cross-site form carries. The
 * token holds where browsers or proxies drop `Origin`; the origin check holds where a token leaks (it is
 * stable per principal, so a token copied out of a saved page would otherwise stay valid), and refuses a
 * cross-site POST before any token comparison.
 */
@Injectable()
export class AdminCsrf {
  private readonly key: Buffer;

  constructor(config: AdminConfig) {
    this.key = config.ADMIN_CSRF_SECRET ? Buffer.from(config.ADMIN_CSRF_SECRET, 'utf8') : randomBytes(32);
  }

  tokenFor(principalId: string): string {
    return createHmac('sha256', this.key).update(`admin-console\0${principalId}`).digest('base64url');
  }

  /** Why the POST is refused, or null when it passes both checks. */
  refusal(req: Request, principalId: string): string | null {
    const site = req.header('sec-fetch-site');
    if (site !== undefined && site !== 'same-origin') return `cross-site request (Sec-Fetch-Site: ${site})`;
    const origin = req.header('origin');
    if (origin !== undefined && !sameHost(origin, req.header('host')))
      return 'the Origin is not this console';
    const body = req.body as Record<string, unknown> | undefined;
    const token = body?.[CSRF_FIELD];
    if (typeof token !== 'string' || !constantTimeEqual(token, this.tokenFor(principalId))) {
      return 'missing or wrong form token (reload the page and try again)';
    }
    return null;
  }
}

/** Host (and port) only: behind a TLS-terminating proxy the scheme the browser used is not the one seen here. */
function sameHost(origin: string, host: string | undefined): boolean {
  if (!host || origin === 'null') return false;
  try {
    return new URL(origin).host.toLowerCase() === host.toLowerCase();
  } catch {
    return false;
  }
}
