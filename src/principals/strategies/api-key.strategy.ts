import { Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { ApiKeysService, looksLikeApiKey } from '../api-keys.service.js';
import type { Principal } from '../principal.js';
import { AuthFailure, AuthFailureReason } from '../principals.errors.js';
import { PrincipalsService } from '../principals.service.js';
import { AuthStrategy, bearerToken, headerValue } from './request-strategy.js';

/** Service-account keys created by the CLI, sent as `x-api-key` or as a bearer token. */
@Injectable()
export class ApiKeyStrategy extends AuthStrategy('apikey') {
  constructor(
    private readonly keys: ApiKeysService,
    private readonly principals: PrincipalsService,
  ) {
    super();
  }

  async validate(req: Request): Promise<Principal> {
    const bearer = bearerToken(req);
    const presented =
      headerValue(req, 'x-api-key') ?? (bearer && looksLikeApiKey(bearer) ? bearer : undefined);
    if (presented === undefined) throw new AuthFailure(AuthFailureReason.Missing);
    const key = await this.keys.verify(presented);
    return this.principals.resolve({
      provider: 'apikey',
      subject: key.id,
      name: key.name,
      scopes: key.scopes,
      groups: [],
    });
  }
}
