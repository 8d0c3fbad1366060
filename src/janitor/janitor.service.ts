import { errorMessage } from '../common/error-message.js';
import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { Counter, Gauge, Histogram } from 'prom-client';
import { asActor } from '../audit/audit-context.js';
import type { AuditActor } from '../audit/audit.types.js';
import { AuditConfig } from '../audit/audit.config.js';
import { InstancesService } from '../instances/instances.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { context, SpanStatusCode, trace } from '@opentelemetry/api';
import { startTaskSpan } from '../telemetry/task-spans.js';
import { tracer } from '../telemetry/tracer.js';
import { TaskMetrics } from '../tasks/task-metrics.service.js';
import { JanitorRepository, type JanitorStep } from './janitor.repository.js';
import type { SweptTask } from '../tasks/store/task-row-writer.js';
import { InstancesConfig } from '../instances/instances.config.js';
import { TasksConfig } from '../tasks/tasks.config.js';
import { JanitorConfig } from './janitor.config.js';

const JOB = 'task-janitor';
/** The janitor's writes (expiries, rescues, deletions) are audited as its own. */
const JANITOR: AuditActor = { kind: 'janitor' };
/** Startup recovery: at most this many batches (the periodic run picks up anything left). */
const MAX_RECOVERY_BATCHES = 20;
/** An instance whose heartbeat is older than this many heartbeat intervals is considered gone. */
const STALE_HEARTBEATS = 3;

export interface JanitorReport {
  result: 'ok' | 'skipped';
  /**
   * Task rows per step; `instance_lapsed` and `instance_pruned`: service_instance rows marked stopped after
   * a silence, and deleted past JANITOR_INSTANCE_RETENTION_HOURS; `audit`: audit rows deleted past
   * AUDIT_RETENTION_DAYS.
   */
  rows: Record<JanitorStep | 'instance_lapsed' | 'instance_pruned' | 'audit', number>;
}

/**
 * The periodic sweep, on one instance at a time (a transaction-scoped advisory lock per batch, so no pooled
 * connection is pinned and a crashed sweeper releases it at once). Each run, in bounded batches:
 * 1. expire: live tasks past created + ttl → failed "Task expired" (workers aborted and waiters woken through
 *    the change notification);
 * 2. lease_lapsed: live tasks whose lease ran out (their process died) → rescued;
 * 3. instance_gone: live tasks held by a stopped or silent instance → rescued;
 * 4. delete: finished tasks past created + ttl + TASK_EXPIRED_GRACE_MS → deleted (each one's last audit row,
 *    task.deleted, goes in with its batch);
 * 5. instances: service_instance rows silent for three heartbeats → marked stopped as of their last one (not
 *    during the outage grace); rows stopped more than JANITOR_INSTANCE_RETENTION_HOURS ago → deleted;
 * 6. audit: audit rows older than AUDIT_RETENTION_DAYS → deleted, oldest first.
 * Every step runs as the janitor (asActor), so the audit rows it causes say so.
 * Every step is idempotent: rows are claimed with FOR UPDATE SKIP LOCKED and re-checked in SQL.
 * A rescue (planRescue) re-queues a resumable task that has attempts left as its next attempt, claimable at
 * once by any instance; any other task fails "worker lost" (a resumable one out of attempts says how many).
 *
 * Outage grace: during a database outage no instance can renew its leases or heartbeat, so right after it
 * every lease and heartbeat looks lapsed although the workers are alive. Steps 2 and 3 therefore wait until
 * this instance has gone one full TASK_LEASE_MS without a failed database call (its own heartbeat, lease
 * renewal or janitor batch): by then every live instance has had three renewal rounds to renew, and only
 * the leases of the really dead are still lapsed. Expiry and deletion are not postponed (they judge created
 * + ttl, which an outage does not change). The cost: a worker that died during the outage is declared lost
 * one lease period later.
 * At startup each instance also rescues the tasks left running by stopped or silent instances (its own
 * previous incarnations included) without waiting for their leases.
 */
@Injectable()
export class JanitorService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(JanitorService.name);
  private readonly runs: Counter<'result'>;
  private readonly rowsTotal: Counter<'action'>;
  private readonly duration: Histogram;
  private readonly lastSuccess: Gauge;
  private readonly outageGraceSkips: Counter;
  private readonly auditDeleted: Counter;
  private sweeping: Promise<JanitorReport> | undefined;
  private stopped = false;

  constructor(
    private readonly repo: JanitorRepository,
    private readonly config: JanitorConfig,
    private readonly auditConfig: AuditConfig,
    private readonly tasksConfig: TasksConfig,
    private readonly instancesConfig: InstancesConfig,
    private readonly instances: InstancesService,
    private readonly taskMetrics: TaskMetrics,
    private readonly scheduler: SchedulerRegistry,
    metrics: MetricsService,
  ) {
    const registers = [metrics.registry];
    this.runs = new Counter({
      name: 'mcp_janitor_runs_total',
      help: 'Janitor runs, by result (ok, skipped: another instance was sweeping, error).',
      labelNames: ['result'] as const,
      registers,
    });
    this.rowsTotal = new Counter({
      name: 'mcp_janitor_rows_total',
      help: 'Task rows the janitor handled, by action (expire, lease_lapsed, instance_gone, delete).',
      labelNames: ['action'] as const,
      registers,
    });
    this.duration = new Histogram({
      name: 'mcp_janitor_run_duration_seconds',
      help: 'Duration of janitor runs.',
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers,
    });
    this.outageGraceSkips = new Counter({
      name: 'mcp_janitor_outage_grace_skips_total',
      help: 'Worker-lost steps the janitor postponed because this instance saw a database failure less than TASK_LEASE_MS ago.',
      registers,
    });
    this.auditDeleted = new Counter({
      name: 'mcp_janitor_audit_rows_deleted_total',
      help: 'Audit trail rows the janitor deleted because they were older than AUDIT_RETENTION_DAYS.',
      registers,
    });
    // Every result and action exists at 0 from boot, so increase() sees the first one.
    for (const result of ['ok', 'skipped', 'error']) this.runs.inc({ result }, 0);
    for (const action of ['expire', 'lease_lapsed', 'instance_gone', 'delete'])
      this.rowsTotal.inc({ action }, 0);
    const { repo: tasks, tasksConfig: settings, logger } = this;
    new Gauge({
      name: 'mcp_janitor_lag_seconds',
      help: 'Age of the oldest task row the janitor should have swept, by step (expire, delete); 0 when none. Read from the database at scrape, so the same on every instance.',
      labelNames: ['step'] as const,
      registers,
      async collect() {
        try {
          const lag = await tasks.janitorLag(settings.TASK_EXPIRED_GRACE_MS);
          this.set({ step: 'expire' }, lag.expire);
          this.set({ step: 'delete' }, lag.delete);
        } catch (err) {
          // No reading, no series: a value kept from before the outage would look current. Prometheus marks
          // the vanished series stale.
          this.reset();
          logger.warn(`mcp_janitor_lag_seconds: ${errorMessage(err)}`);
        }
      },
    });
    this.lastSuccess = new Gauge({
      name: 'mcp_janitor_last_success_timestamp_seconds',
      help: 'Unix time of the last janitor run that completed on this instance (skipped runs excluded).',
      registers,
    });
  }

  async onApplicationBootstrap(): Promise<void> {
    try {
      const n = await this.recoverOrphans();
      if (n > 0) this.logger.warn(`rescued ${n} task(s) left running by stopped instances`);
    } catch (err) {
      this.logger.error(`startup recovery failed: ${errorMessage(err)}`);
    }
    if (!this.config.JANITOR_ENABLED) return;
    const timer = setInterval(() => {
      this.runOnce().catch((err: unknown) => {
        this.logger.warn(`janitor run failed: ${errorMessage(err)}`);
      });
    }, this.config.JANITOR_INTERVAL_MS);
    timer.unref();
    this.scheduler.addInterval(JOB, timer);
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    if (this.scheduler.doesExist('interval', JOB)) this.scheduler.deleteInterval(JOB);
    await this.sweeping?.catch(() => undefined);
  }

  /** Rescues live tasks held by stopped or silent instances (never this one). Returns how many. */
  recoverOrphans(): Promise<number> {
    return asActor(JANITOR, () => this.traced('janitor recover_orphans', () => this.recoverOrphansNow()));
  }

  private async recoverOrphansNow(): Promise<number> {
    let total = 0;
    for (let i = 0; i < MAX_RECOVERY_BATCHES; i++) {
      const rows = await this.repo.failOrphaned(
        this.instances.instanceId,
        this.staleInstanceMs(),
        this.config.JANITOR_BATCH_SIZE,
      );
      this.account('instance_gone', rows);
      total += rows.length;
      if (rows.length < this.config.JANITOR_BATCH_SIZE) break;
    }
    return total;
  }

  /** One sweep (also what the schedule calls). Overlapping calls on one instance share the same run. */
  runOnce(): Promise<JanitorReport> {
    this.sweeping ??= asActor(JANITOR, () => this.traced('janitor sweep', () => this.sweep())).finally(() => {
      this.sweeping = undefined;
    });
    return this.sweeping;
  }

  /** A root span for a janitor run; the per-task spans it causes join each task's own trace and link here. */
  private async traced<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const span = tracer().startSpan(name, { root: true });
    try {
      return await context.with(trace.setSpan(context.active(), span), fn);
    } catch (err) {
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: errorMessage(err),
      });
      throw err;
    } finally {
      span.end();
    }
  }

  private async sweep(): Promise<JanitorReport> {
    const started = process.hrtime.bigint();
    const rows: JanitorReport['rows'] = {
      expire: 0,
      lease_lapsed: 0,
      instance_gone: 0,
      delete: 0,
      instance_lapsed: 0,
      instance_pruned: 0,
      audit: 0,
    };
    const opts = {
      batchSize: this.config.JANITOR_BATCH_SIZE,
      graceMs: this.tasksConfig.TASK_EXPIRED_GRACE_MS,
      selfInstanceId: this.instances.instanceId,
      staleInstanceMs: this.staleInstanceMs(),
    };
    const inOutageGrace = this.instances.msSinceDbError() < this.tasksConfig.TASK_LEASE_MS;
    try {
      for (const step of ['expire', 'lease_lapsed', 'instance_gone', 'delete'] as const) {
        if (inOutageGrace && (step === 'lease_lapsed' || step === 'instance_gone')) {
          this.outageGraceSkips.inc();
          continue;
        }
        const done = await this.inBatches(async () => {
          const batch = await this.repo.janitorBatch(step, opts);
          if (batch === null) return null;
          this.account(step, batch);
          rows[step] += batch.length;
          return batch.length;
        });
        if (!done) return this.skipped(rows);
      }
      // Instance rows: the silent ones marked stopped (after the outage grace, like the rescues: during an
      // outage every heartbeat looks old), and old stopped ones deleted.
      for (const step of ['lapse', 'prune'] as const) {
        if (step === 'lapse' && inOutageGrace) continue;
        const done = await this.inBatches(async () => {
          const n = await this.repo.instanceBatch(step, {
            ...opts,
            retentionHours: this.config.JANITOR_INSTANCE_RETENTION_HOURS,
          });
          if (n === null) return null;
          rows[step === 'lapse' ? 'instance_lapsed' : 'instance_pruned'] += n;
          return n;
        });
        if (!done) return this.skipped(rows);
      }
      const retention = this.auditConfig.AUDIT_RETENTION_DAYS;
      const auditDone = await this.inBatches(async () => {
        const n = await this.repo.deleteAuditBatch(retention, opts.batchSize);
        if (n === null) return null;
        this.auditDeleted.inc(n);
        rows.audit += n;
        return n;
      });
      if (!auditDone) return this.skipped(rows);
    } catch (err) {
      this.instances.noteDbError();
      this.runs.inc({ result: 'error' });
      throw err;
    }
    this.runs.inc({ result: 'ok' });
    this.duration.observe(Number(process.hrtime.bigint() - started) / 1e9);
    this.lastSuccess.set(Date.now() / 1000);
    return { result: 'ok', rows };
  }

  private skipped(rows: JanitorReport['rows']): JanitorReport {
    this.runs.inc({ result: 'skipped' });
    return { result: 'skipped', rows };
  }

  /**
   * Runs one step's `batch` until it comes back short (fewer than JANITOR_BATCH_SIZE rows): a backlog is
   * worked off in full batches for up to one interval per step, paced so that the batches take
   * JANITOR_DUTY_PERCENT of the time and live traffic keeps the rest. False when a batch found another
   * instance sweeping (it returned null): the run stops there.
   */
  private async inBatches(batch: () => Promise<number | null>): Promise<boolean> {
    const stepEnd = performance.now() + Math.max(1000, this.config.JANITOR_INTERVAL_MS);
    const pauseFactor = 100 / this.config.JANITOR_DUTY_PERCENT - 1;
    while (!this.stopped) {
      const batchStarted = performance.now();
      const n = await batch();
      if (n === null) return false;
      if (n < this.config.JANITOR_BATCH_SIZE || performance.now() >= stepEnd) break;
      const pause = (performance.now() - batchStarted) * pauseFactor;
      if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause).unref());
    }
    return true;
  }

  private account(step: JanitorStep, rows: SweptTask[]): void {
    if (rows.length === 0) return;
    this.rowsTotal.inc({ action: step }, rows.length);
    for (const t of rows) {
      startTaskSpan(`janitor ${step}`, t, { 'mcp.janitor.action': step, 'mcp.task.status': t.status }).end();
      switch (step) {
        case 'expire':
          this.taskMetrics.taskFinished(t, 'expired');
          break;
        case 'lease_lapsed':
        case 'instance_gone':
          // A rescued task still working was re-queued for its next attempt; it has not finished.
          if (t.status === 'working') {
            this.taskMetrics.rescued(t.toolName, 'requeued');
          } else {
            this.taskMetrics.taskFinished(t, 'failed');
            this.taskMetrics.rescued(t.toolName, 'failed');
          }
          break;
        case 'delete':
          break;
      }
    }
  }

  private staleInstanceMs(): number {
    return STALE_HEARTBEATS * this.instancesConfig.INSTANCE_HEARTBEAT_MS;
  }
}
