import { Injectable } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config.js';
import { migrationsApplied } from '../database/migrations-runner.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import { MetricsService } from '../metrics/metrics.service.js';

export type CheckResult = { status: 'up' } | { status: 'down'; reason: string };
export type ReadinessCheck = () => Promise<CheckResult>;

export interface ReadinessReport {
  status: 'ok' | 'error';
  checks: Record<string, CheckResult>;
}

async function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Readiness is the conjunction of named checks. The foundation contributes the drain state, a database
 * ping and the migration state; later modules (the notification listener) add theirs with `register`.
 */
@Injectable()
export class HealthService {
  private readonly checks = new Map<string, ReadinessCheck>();
  private readonly readyGauge: Gauge;
  private readonly readyChanges: Counter;
  private lastReady: boolean | undefined;

  constructor(
    private readonly dataSource: DataSource,
    private readonly lifecycle: LifecycleService,
    private readonly config: AppConfig,
    metrics: MetricsService,
  ) {
    // Readiness as the probes see it: the flapping alert counts changes, the dashboard shows the state.
    this.readyGauge = new Gauge({
      name: 'mcp_ready',
      help: 'Result of the last readiness check on this instance (1 ready, 0 not; -1 before the first check).',
      registers: [metrics.registry],
    });
    this.readyGauge.set(-1);
    this.readyChanges = new Counter({
      name: 'mcp_readiness_changes_total',
      help: 'Times the readiness of this instance changed between ready and not ready.',
      registers: [metrics.registry],
    });
    this.readyChanges.inc(0);
    this.register('shutdown', async () =>
      this.lifecycle.draining ? { status: 'down', reason: 'shutting down' } : { status: 'up' },
    );
    this.register('database', async () => {
      await this.dataSource.query('SELECT 1');
      return { status: 'up' };
    });
    this.register('migrations', async () =>
      (await migrationsApplied(this.dataSource))
        ? { status: 'up' }
        : { status: 'down', reason: 'pending migrations' },
    );
  }

  register(name: string, check: ReadinessCheck): void {
    this.checks.set(name, check);
  }

  async readiness(): Promise<ReadinessReport> {
    const timeout = this.config.HEALTH_DB_TIMEOUT_MS;
    const entries = await Promise.all(
      [...this.checks].map(async ([name, check]): Promise<[string, CheckResult]> => {
        try {
          return [name, await withTimeout(check(), timeout, name)];
        } catch (err) {
          return [name, { status: 'down', reason: err instanceof Error ? err.message : String(err) }];
        }
      }),
    );
    const checks = Object.fromEntries(entries);
    const ok = entries.every(([, r]) => r.status === 'up');
    if (this.lastReady !== undefined && this.lastReady !== ok) this.readyChanges.inc();
    this.lastReady = ok;
    this.readyGauge.set(ok ? 1 : 0);
    return { status: ok ? 'ok' : 'error', checks };
  }
}
