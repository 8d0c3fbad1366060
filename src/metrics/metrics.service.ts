import { Injectable } from '@nestjs/common';
import { collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { BUILD_VERSION } from '../common/build-info.js';

const HTTP_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * Owns this app's Prometheus registry. A registry per app (not prom-client's global one) lets several apps
 * live in one process, as the e2e tests do, without duplicate-metric errors. Feature modules register their
 * own metrics on `registry`.
 */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();

  readonly httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request duration in seconds, by method, route template and status class.',
    labelNames: ['method', 'route', 'status_class'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    new Gauge({
      name: 'mcp_build_info',
      help: 'Build information; always 1.',
      labelNames: ['version', 'node_version'] as const,
      registers: [this.registry],
    }).set({ version: BUILD_VERSION, node_version: process.version }, 1);
  }

  /**
   * `route` is the matched route's template (or `unmatched`), never the path a client sent. The method is
   * the client's token: Node's parser accepts some thirty methods, so those this server routes are kept
   * and the rest are `other`.
   */
  observeHttp(method: string, route: string, status: number, seconds: number): void {
    this.httpDuration.observe(
      {
        method: HTTP_METHODS.has(method) ? method : 'other',
        route,
        status_class: `${Math.floor(status / 100)}xx`,
      },
      seconds,
    );
  }
}
