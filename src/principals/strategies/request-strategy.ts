import { PassportStrategy } from '@nestjs/passport';
import type { Request } from 'express';
import type { Principal } from '../principal.js';
import { AuthFailure, AuthFailureReason } from '../principals.errors.js';

type Done = (err: unknown, principal?: Principal | false | null) => void;
type Verify = (req: Request, done: Done) => void;

/**
 * A passport strategy that hands the whole request to `validate(req)` (through @nestjs/passport's verify
 * callback) and reports an AuthFailure as a passport failure carrying the reason, so the guard can pick the
 * most telling failure among several strategies.
 */
export class RequestStrategy {
  // Passport puts these on the per-request copy of the strategy before calling authenticate().
  declare success: (principal: Principal) => void;
  declare fail: (failure: AuthFailure, status: number) => void;
  declare error: (err: unknown) => void;

  constructor(private readonly verify: Verify) {}

  authenticate(req: Request): void {
    this.verify(req, (err, principal) => {
      if (err instanceof AuthFailure) return this.fail(err, 401);
      if (err) return this.error(err);
      if (!principal) return this.fail(new AuthFailure(AuthFailureReason.Missing), 401);
      return this.success(principal);
    });
  }
}

/** Registration target for strategies: they are used through AuthPassport's own instance only. */
const DETACHED = { use: (): void => undefined };

/**
 * Base of our strategies. @nestjs/passport registers a strategy on passport's process-wide singleton; ours
 * live on a passport instance per app (AuthPassport), so two apps in one process (the tests) never share
 * strategies configured for different issuers.
 */
export function AuthStrategy(name: 'oidc' | 'proxy' | 'apikey') {
  abstract class DetachedStrategy extends PassportStrategy(RequestStrategy, name) {
    readonly strategyName = name;

    getPassportInstance(): typeof DETACHED {
      return DETACHED;
    }

    abstract override validate(req: Request): Promise<Principal>;
  }
  return DetachedStrategy;
}

/** The bearer token of `Authorization: Bearer <token>`; never read from the query string. */
export function bearerToken(req: Request): string | undefined {
  const header = req.headers.authorization;
  if (!header) return undefined;
  const m = /^Bearer +([^\s]+) *$/i.exec(header);
  return m ? m[1] : undefined;
}

/** A single-valued header, trimmed; undefined when absent or empty. */
export function headerValue(req: Request, name: string): string | undefined {
  const raw = req.headers[name];
  const value = (Array.isArray(raw) ? raw[0] : raw)?.trim();
  return value ? value : undefined;
}
