import { Injectable, Logger } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import { retireConnections } from '../database/read-only-connections.js';
import { poolOf } from '../database/statement-mode.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { msSinceRetryableFault } from '../common/internal-fault.js';
import { probeFailureReason } from './probe-failure.js';
import { errorMessage } from '../common/error-message.js';
import { HealthConfig } from './health.config.js';

export type CheckResult = { status: 'up' } | { status: 'down'; reason: string };
export type ReadinessCheck = () => Promise<CheckResult>;

export interface ReadinessReport {
  status: 'ok' | 'error';
  checks: Record<string, CheckResult>;
}

/** Readiness probes from every load balancer and kubelet are served from one check per this period. */
export const READINESS_CACHE_MS = 1000;
/**
 * How long readiness stays down after a request failed with a database fault a retry can cure (answered
 * 503): the probe's own query may well pass while requests fail (a pooler losing prepared statements, a
 * deadlock storm), and a balancer should prefer other instances while that lasts.
 */
export const RETRYABLE_FAULT_WINDOW_MS = 2000;
/** The client-side bound sits a little past the server-side statement_timeout, which normally fires first. */
const CLIENT_TIMEOUT_MARGIN_MS = 500;

class ProbeTimeout extends Error {
  constructor() {
    super('probe timed out');
    this.name = 'ProbeTimeout';
  }
}

async function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new ProbeTimeout()), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Readiness is the conjunction of named checks: the drain state (live, never cached, so SIGTERM turns
 * readiness off at once), a database probe, the migration state and whatever later modules `register`
 * (the notification listener). Everything but the drain state is computed at most once per
 * READINESS_CACHE_MS; probes arriving while a check runs share it. The database probe runs under a
 * server-side statement_timeout and lock_timeout, so a slow or blocked probe is cancelled by PostgreSQL
 * itself instead of lingering on a pooled connection. Reasons are short fixed strings, never driver text.
 */
@Injectable()
export class HealthService {
  private readonly logger = new Logger(HealthService.name);
  private readonly checks = new Map<string, ReadinessCheck>();
  /** Checks of in-memory state (no I/O): evaluated on every probe, never served from the cache. */
  private readonly liveChecks = new Map<string, ReadinessCheck>();
  private cached?: { at: number; checks: Record<string, CheckResult> };
  private inFlight?: Promise<Record<string, CheckResult>>;
  private readonly readyGauge: Gauge;
  private readonly readyChanges: Counter;
  private lastReady: boolean | undefined;

  constructor(
    private readonly dataSource: DataSource,
    private readonly lifecycle: LifecycleService,
    private readonly config: HealthConfig,
    metrics: MetricsService,
  ) {
    // Readiness as the probes see it: the flapping alert counts changes, the dashboard shows the state.
    this.readyGauge = new Gauge({
      name: 'mcp_ready',
      help: 'Readiness of this instance as of this scrape (1 ready, 0 not); every scrape runs the readiness check.',
      registers: [metrics.registry],
      // Evaluated at scrape, not only when a probe happens to come: an instance nobody probes (taken out of
      // the load balancer, a probe misconfigured) still reports its state. The database part is shared with
      // the probes (one check per READINESS_CACHE_MS).
      collect: async () => {
        await this.readiness();
      },
    });
    this.readyGauge.set(-1);
    this.readyChanges = new Counter({
      name: 'mcp_readiness_changes_total',
      help: 'Times the readiness of this instance changed between ready and not ready.',
      registers: [metrics.registry],
    });
    this.readyChanges.inc(0);
    this.register(
      'database_faults',
      () =>
        Promise.resolve<CheckResult>(
          msSinceRetryableFault() < RETRYABLE_FAULT_WINDOW_MS
            ? { status: 'down', reason: 'retryable faults' }
            : { status: 'up' },
        ),
      { live: true },
    );
  }

  /**
   * Adds a named check. A check that only reads in-memory state may say `live: true` and is then evaluated on
   * every probe (a reconnected listener shows at once); any other is part of the once-a-second cached round.
   */
  register(name: string, check: ReadinessCheck, opts: { live?: boolean } = {}): void {
    (opts.live ? this.liveChecks : this.checks).set(name, check);
  }

  async readiness(): Promise<ReadinessReport> {
    const shutdown: CheckResult = this.lifecycle.drainAnnounced
      ? { status: 'down', reason: 'shutting down' }
      : { status: 'up' };
    const [cached, live] = await Promise.all([this.cachedChecks(), this.run(this.liveChecks)]);
    const checks = { shutdown, ...cached, ...live };
    const ok = Object.values(checks).every((r) => r.status === 'up');
    if (this.lastReady !== undefined && this.lastReady !== ok) this.readyChanges.inc();
    this.lastReady = ok;
    this.readyGauge.set(ok ? 1 : 0);
    return { status: ok ? 'ok' : 'error', checks };
  }

  private cachedChecks(): Promise<Record<string, CheckResult>> {
    if (this.cached && Date.now() - this.cached.at < READINESS_CACHE_MS) {
      return Promise.resolve(this.cached.checks);
    }
    this.inFlight ??= this.runChecks()
      .then((checks) => {
        this.cached = { at: Date.now(), checks };
        return checks;
      })
      .finally(() => {
        this.inFlight = undefined;
      });
    return this.inFlight;
  }

  private async runChecks(): Promise<Record<string, CheckResult>> {
    const [database, registered] = await Promise.all([this.probeDatabase(), this.run(this.checks)]);
    return { ...database, ...registered };
  }

  private async run(checks: Map<string, ReadinessCheck>): Promise<Record<string, CheckResult>> {
    const timeout = this.config.HEALTH_DB_TIMEOUT_MS;
    const entries = await Promise.all(
      [...checks].map(async ([name, check]): Promise<[string, CheckResult]> => {
        try {
          return [name, await within(check(), timeout + CLIENT_TIMEOUT_MARGIN_MS)];
        } catch (err) {
          return [name, this.down(name, err)];
        }
      }),
    );
    return Object.fromEntries(entries);
  }

  /**
   * One transaction, two statements: the database answers and accepts writes, and every migration this code
   * knows is applied.
   */
  private async probeDatabase(): Promise<{ database: CheckResult; migrations: CheckResult }> {
    const ms = this.config.HEALTH_DB_TIMEOUT_MS;
    const known = this.dataSource.migrations.map((m) => m.name ?? m.constructor.name);
    const table = this.dataSource.options.migrationsTableName ?? 'migrations';
    let database: CheckResult = { status: 'down', reason: 'not checked' };
    let migrations: CheckResult = { status: 'down', reason: 'not checked' };
    const runner = this.dataSource.createQueryRunner();
    const work = (async () => {
      await runner.connect();
      await runner.startTransaction();
      try {
        await runner.query(`SET LOCAL statement_timeout = ${ms}; SET LOCAL lock_timeout = ${ms}`);
        // Writable, not merely answering: a hot standby the address still leads to after a failover (DNS
        // caching) answers reads but refuses every write, so requests would get 503s while the probe passed.
        const [{ read_only: readOnly }] = (await runner.query(
          `SELECT current_setting('transaction_read_only') = 'on' AS read_only`,
        )) as { read_only: boolean }[];
        if (readOnly) {
          // Its connections stay on that server for life: closed at release, so the pool reconnects through
          // the address (and finds the primary once it moved back).
          retireConnections(poolOf(this.dataSource));
          database = { status: 'down', reason: 'read-only' };
          this.logger.warn('readiness check database down (read-only): the server refuses writes');
        } else {
          database = { status: 'up' };
        }
        const rows = (await runner.query(`SELECT name FROM "${table}"`)) as { name: string }[];
        const applied = new Set(rows.map((r) => r.name));
        migrations = known.every((n) => applied.has(n))
          ? { status: 'up' }
          : { status: 'down', reason: 'pending migrations' };
        await runner.commitTransaction();
      } catch (err) {
        await runner.rollbackTransaction().catch(() => undefined);
        throw err;
      }
    })();
    try {
      await within(work, ms + CLIENT_TIMEOUT_MARGIN_MS);
    } catch (err) {
      if (database.status === 'down') database = this.down('database', err);
      else migrations = this.down('migrations', err);
    } finally {
      // Released once the work settles: a connection still busy with a cancelled statement is not reused early.
      void work.catch(() => undefined).finally(() => runner.release().catch(() => undefined));
    }
    return { database, migrations };
  }

  private down(name: string, err: unknown): CheckResult {
    const reason = err instanceof ProbeTimeout ? 'timeout' : probeFailureReason(err);
    this.logger.warn(`readiness check ${name} down (${reason}): ${errorMessage(err)}`);
    return { status: 'down', reason };
  }
}
