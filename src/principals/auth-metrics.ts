import { Injectable } from '@nestjs/common';
import { Counter } from 'prom-client';
import { MetricsService } from '../metrics/metrics.service.js';
import { AUTH_FAILURE_REASONS, type AuthFailureReason } from './principals.errors.js';

@Injectable()
export class AuthMetrics {
  private readonly failures: Counter<'reason'>;

  constructor(metrics: MetricsService) {
    this.failures = new Counter({
      name: 'mcp_auth_failures_total',
      help: 'Requests refused by authentication, by reason.',
      labelNames: ['reason'] as const,
      registers: [metrics.registry],
    });
    // Every reason exists from the start, so rate() sees the first failure of each.
    for (const reason of AUTH_FAILURE_REASONS) this.failures.inc({ reason }, 0);
  }

  failed(reason: AuthFailureReason): void {
    this.failures.inc({ reason });
  }
}
