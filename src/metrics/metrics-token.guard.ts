import { HttpException, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { Request, Response } from 'express';
import { constantTimeEqual } from '../common/constant-time.js';
import { MetricsConfig } from './metrics.config.js';

/** When METRICS_TOKEN is set, /metrics needs `Authorization: Bearer <METRICS_TOKEN>`. */
@Injectable()
export class MetricsTokenGuard implements CanActivate {
  constructor(private readonly config: MetricsConfig) {}

  canActivate(context: ExecutionContext): boolean {
    const expected = this.config.METRICS_TOKEN;
    if (!expected) return true;
    const req = context.switchToHttp().getRequest<Request>();
    const m = /^Bearer +(\S+) *$/i.exec(req.headers.authorization ?? '');
    if (m && constantTimeEqual(m[1], expected)) return true;
    context.switchToHttp().getResponse<Response>().setHeader('WWW-Authenticate', 'Bearer realm="metrics"');
    throw new HttpException(
      { statusCode: 401, error: 'unauthorized', message: 'Metrics need a bearer token' },
      401,
    );
  }
}
