import { Injectable } from '@nestjs/common';
import { Gauge, Histogram } from 'prom-client';
import { MetricsService } from '../metrics/metrics.service.js';
import type { SseWriter } from './sse-writer.js';

/**
 * request: a legacy POST response stream (or its resumption); standalone: a legacy GET stream;
 * stateless: a 2026-07-28 response or subscriptions/listen stream.
 */
export type SseStreamKind = 'request' | 'standalone' | 'stateless';
const KINDS: readonly SseStreamKind[] = ['request', 'standalone', 'stateless'];

/** Accounting of the SSE streams this instance holds open, and of how late logged events reach them. */
@Injectable()
export class SseStreams {
  private readonly open = new Map<SseStreamKind, number>(KINDS.map((k) => [k, 0]));
  private readonly lag: Histogram<'kind'>;

  constructor(metrics: MetricsService) {
    const open = this.open;
    new Gauge({
      name: 'mcp_sse_streams_active',
      help: 'Open SSE streams held by this instance, by kind (request, standalone, stateless).',
      labelNames: ['kind'] as const,
      registers: [metrics.registry],
      collect() {
        for (const [kind, n] of open) this.set({ kind }, n);
      },
    });
    this.lag = new Histogram({
      name: 'mcp_notification_delivery_lag_seconds',
      help: 'Time from an SSE event being committed to the event log to its being written to the client stream.',
      labelNames: ['kind'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [metrics.registry],
    });
  }

  /** Counts `writer` as an open stream of `kind` until it closes. */
  track(kind: SseStreamKind, writer: SseWriter): void {
    this.open.set(kind, (this.open.get(kind) ?? 0) + 1);
    writer.onClose(() => this.open.set(kind, (this.open.get(kind) ?? 1) - 1));
  }

  /**
   * A logged event was just written to a live stream. `committedAt` is the row's database timestamp, so
   * clock skew between this instance and PostgreSQL shows up here; keep hosts on NTP.
   */
  delivered(committedAt: Date): void {
    this.lag.observe({ kind: 'sse' }, Math.max(0, (Date.now() - committedAt.getTime()) / 1000));
  }
}
