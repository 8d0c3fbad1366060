import { HttpException, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { Request } from 'express';
import { errorResponse, JSONRPC } from '../protocol/json-rpc.js';
import { OriginPolicy } from './origin-policy.js';
import { ServerConfig } from '../config/server.config.js';
import { GatewayConfig } from './gateway.config.js';

/**
 * The DNS-rebinding check as the first guard of /mcp, ahead of McpAuthGuard: a page on a foreign origin
 * gets a plain 403, never an auth challenge naming its own Host, and costs no token verification.
 */
@Injectable()
export class OriginGuard implements CanActivate {
  private readonly policy: OriginPolicy;

  constructor(config: GatewayConfig, server: ServerConfig) {
    this.policy = new OriginPolicy(config, server);
  }

  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<Request>();
    const refusal = this.policy.check(req.header('host'), req.header('origin'));
    if (!refusal) return true;
    // The body keeps the endpoint's JSON-RPC dialect; AllExceptionsFilter sends an object response as is.
    throw new HttpException(errorResponse(null, { code: JSONRPC.SERVER_ERROR, message: refusal }), 403);
  }
}
