import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import type { Request, Response } from 'express';
import passport from 'passport';
import type { Principal } from './principal.js';
import { AuthFailure, AuthFailureReason } from './principals.errors.js';
import { ApiKeyStrategy } from './strategies/api-key.strategy.js';
import { OidcStrategy } from './strategies/oidc.strategy.js';
import { ProxyStrategy } from './strategies/proxy.strategy.js';
import { PrincipalsConfig, type AuthProviderName } from './principals.config.js';

/**
 * The order strategies are tried in, whatever the order of AUTH_PROVIDERS: the proxy only acts on its
 * identity headers, apikey only on `x-api-key` or an `mcpk_` bearer, and oidc takes any other bearer token.
 */
const ORDER: readonly AuthProviderName[] = ['proxy', 'apikey', 'oidc'];

export type Authentication = { principal: Principal } | { failure: AuthFailure };

/**
 * This app's passport instance with the active strategies. Passport tries them in ORDER until one succeeds;
 * when all fail, the reason reported is that of the first strategy that recognized the credential as its
 * own, else the first refusal, else "missing".
 */
@Injectable()
export class AuthPassport implements OnApplicationBootstrap {
  private readonly logger = new Logger('Auth');
  private readonly authenticator = new passport.Passport();
  readonly active: AuthProviderName[];

  constructor(config: PrincipalsConfig, oidc: OidcStrategy, proxy: ProxyStrategy, apikey: ApiKeyStrategy) {
    const strategies = { oidc, proxy, apikey };
    this.active = ORDER.filter((name) => config.hasAuthProvider(name));
    for (const name of this.active) this.authenticator.use(name, strategies[name]);
  }

  get enabled(): boolean {
    return this.active.length > 0;
  }

  onApplicationBootstrap(): void {
    if (this.enabled) {
      this.logger.log(`authentication providers: ${this.active.join(', ')}`);
      return;
    }
    this.logger.warn(
      '!!! AUTH_PROVIDERS is empty: authentication is OFF and every request runs as the anonymous ' +
        'development principal. Never expose this instance; NODE_ENV=production refuses this on a non-loopback HOST. !!!',
    );
  }

  /** Runs the active strategies; rejects only when a provider could not be consulted (AuthProviderUnavailable). */
  authenticate(req: Request, res: Response): Promise<Authentication> {
    return new Promise((resolve, reject) => {
      const middleware = this.authenticator.authenticate(
        this.active,
        { session: false },
        (err: unknown, principal: Principal | false, failures?: unknown) => {
          if (err) return reject(err instanceof Error ? err : new Error('passport strategy error'));
          if (principal) return resolve({ principal });
          const refused = (Array.isArray(failures) ? failures : [failures]).filter(
            (f): f is AuthFailure => f instanceof AuthFailure,
          );
          const chosen =
            refused.find((f) => f.recognized) ??
            refused.find((f) => f.reason !== AuthFailureReason.Missing) ??
            new AuthFailure(AuthFailureReason.Missing);
          resolve({ failure: chosen });
        },
      ) as (req: Request, res: Response, next: (err?: unknown) => void) => void;
      middleware(req, res, (err?: unknown) =>
        reject(err instanceof Error ? err : new Error('passport ended without a decision')),
      );
    });
  }
}
