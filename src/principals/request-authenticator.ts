import { Injectable, Logger, ServiceUnavailableException } from '@nestjs/common';
import type { Request, Response } from 'express';
import { AuthChallenges } from './auth-challenges.js';
import { AuthMetrics } from './auth-metrics.js';
import { AuthPassport } from './auth-passport.js';
import type { Principal } from './principal.js';
import { AuthProviderUnavailable } from './principals.errors.js';

/**
 * Who sent a request, by the active providers, for every guard that needs a signed-in caller (/mcp and
 * /admin): one mapping of the outcomes, so both answer alike. Identity provider unreachable: 503 with
 * Retry-After. No valid credential: counted in mcp_auth_failures_total and answered 401 with the RFC
 * 6750/9728 challenge. What the caller may then do (scopes, admin) is each guard's own decision.
 */
@Injectable()
export class RequestAuthenticator {
  private readonly logger = new Logger('Auth');

  constructor(
    private readonly passport: AuthPassport,
    private readonly challenges: AuthChallenges,
    private readonly metrics: AuthMetrics,
  ) {}

  /** Whether any provider is configured (without one, nobody can be authenticated). */
  get enabled(): boolean {
    return this.passport.enabled;
  }

  /** The authenticated principal; throws the 503 or 401 described above. */
  async authenticate(req: Request, res: Response): Promise<Principal> {
    let outcome;
    try {
      outcome = await this.passport.authenticate(req, res);
    } catch (err) {
      if (err instanceof AuthProviderUnavailable) {
        res.setHeader('Retry-After', '5');
        throw new ServiceUnavailableException(err.message);
      }
      throw err;
    }
    if ('failure' in outcome) {
      this.metrics.failed(outcome.failure.reason);
      this.logger.debug(`authentication refused: ${outcome.failure.reason}`);
      throw this.challenges.reject(res, this.challenges.unauthorized(req, outcome.failure));
    }
    return outcome.principal;
  }
}
