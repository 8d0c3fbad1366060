import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { Gauge, Histogram } from 'prom-client';
import { errorMessage } from '../../common/error-message.js';
import { MetricsService } from '../../metrics/metrics.service.js';
import { ToolRegistry } from '../../tool-dispatch/tool-registry.service.js';
import { ToolQueueRepository, type QueueGauges, type WaitReason } from '../store/tool-queue.repository.js';

const REASONS: readonly WaitReason[] = ['paused', 'limit', 'fair_share', 'no_slot'];
/** A scrape within this long of the last reads the same numbers (several scrapers, one database). */
const READ_TTL_MS = 1000;

/**
 * The gauges of sharing the queue (docs/observability.md), read from the database at scrape time so every
 * instance reports the same true numbers: queued tasks by tool and why they wait, what each declared limit
 * has in use against its capacity, the keys at their per-key limit, and which tools' queues are paused; and,
 * observed by the claimer here, the time from claimable to running by tool. Labels are bounded: tool names
 * of this server's registry, four reasons, two limits.
 */
@Injectable()
export class QueueSharingMetrics implements OnModuleInit {
  private readonly logger = new Logger(QueueSharingMetrics.name);
  private readonly claimWait: Histogram<'tool'>;
  private last: { at: number; read: Promise<QueueGauges> } | undefined;

  constructor(
    private readonly metrics: MetricsService,
    private readonly repo: ToolQueueRepository,
    private readonly tools: ToolRegistry,
  ) {
    this.claimWait = new Histogram({
      name: 'mcp_task_claim_wait_seconds',
      help: 'Time from a task becoming claimable to its claim (the run starts in the same turn), by tool; database clock.',
      labelNames: ['tool'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60, 300, 900, 3600],
      registers: [metrics.registry],
    });
  }

  onModuleInit(): void {
    const taskTools = this.tools.listTools().filter((t) => t.taskSupport !== 'forbidden');
    const served = new Set(taskTools.map((t) => t.name));
    const concurrent = taskTools.filter((t) => t.limits?.concurrency !== undefined);
    const perKey = taskTools.filter((t) => t.limits?.perKey !== undefined);
    const rates = taskTools.flatMap((t) =>
      t.limits?.rate
        ? [{ tool: t.name, starts: t.limits.rate.starts, intervalMs: t.limits.rate.intervalMs }]
        : [],
    );
    for (const t of taskTools) this.claimWait.zero({ tool: t.name });
    const read = (): Promise<QueueGauges> => this.read(rates);
    this.databaseGauge(
      'mcp_task_queue_waiting',
      "Queued tasks in the database by tool and why they wait: paused (the tool's queue), limit (a limit the tool declares), fair_share (other callers run fewer, they go first), no_slot (every worker slot is busy).",
      ['tool', 'reason'],
      async (set) => {
        const { waiting } = await read();
        for (const t of taskTools) for (const reason of REASONS) set({ tool: t.name, reason }, 0);
        // Only tools served here: tasks of a tool removed by a deploy would add labels nobody declared.
        for (const w of waiting) if (served.has(w.tool)) set({ tool: w.tool, reason: w.reason }, w.n);
      },
    );
    this.databaseGauge(
      'mcp_tool_limit_in_use',
      "What a tool's declared limits have in use across the cluster, by tool and limit: concurrency (runs going, leases not lapsed) or rate (starts inside the interval).",
      ['tool', 'limit'],
      async (set) => {
        const { running, started } = await read();
        for (const t of concurrent) {
          const n = running.filter((r) => r.tool === t.name).reduce((sum, r) => sum + r.n, 0);
          set({ tool: t.name, limit: 'concurrency' }, n);
        }
        for (const r of rates)
          set({ tool: r.tool, limit: 'rate' }, started.find((s) => s.tool === r.tool)?.n ?? 0);
      },
    );
    this.databaseGauge(
      'mcp_tool_limit_per_key_saturated',
      'Keys of a tool declaring limits.perKey whose runs are at the per-key limit now (their next call waits), by tool.',
      ['tool'],
      async (set) => {
        const { running } = await read();
        for (const t of perKey) {
          const cap = t.limits?.perKey?.concurrency ?? 0;
          set({ tool: t.name }, running.filter((r) => r.tool === t.name && r.n >= cap).length);
        }
      },
    );
    this.databaseGauge(
      'mcp_tool_queue_paused',
      "1 while a tool's queue is paused by an operator (queue pause), else 0, by tool.",
      ['tool'],
      async (set) => {
        const paused = new Set(await this.repo.pausedTools());
        for (const t of taskTools) set({ tool: t.name }, paused.has(t.name) ? 1 : 0);
      },
    );
    const capacity = new Gauge({
      name: 'mcp_tool_limit_capacity',
      help: 'What a tool declares, by tool and limit: concurrency (limits.concurrency, runs at once) or rate (limits.rate.starts per interval); saturation is in_use / capacity.',
      labelNames: ['tool', 'limit'] as const,
      registers: [this.metrics.registry],
    });
    for (const t of concurrent)
      capacity.set({ tool: t.name, limit: 'concurrency' }, t.limits?.concurrency ?? 0);
    for (const r of rates) capacity.set({ tool: r.tool, limit: 'rate' }, r.starts);
  }

  /**
   * A gauge set at scrape time from a database read; a read that fails leaves the gauge out of that scrape
   * (Prometheus marks it stale) instead of showing the numbers from before.
   */
  private databaseGauge(
    name: string,
    help: string,
    labelNames: string[],
    fill: (set: (labels: Record<string, string>, value: number) => void) => Promise<void>,
  ): void {
    const logger = this.logger;
    new Gauge({
      name,
      help,
      labelNames,
      registers: [this.metrics.registry],
      async collect() {
        try {
          await fill((labels, value) => this.set(labels, value));
        } catch (err) {
          this.reset();
          logger.warn(`${name}: ${errorMessage(err)}`);
        }
      },
    });
  }

  /** A claim's tasks: each one's tool and how long it was claimable (database clock). */
  claimed(tasks: readonly { tool: string; waitedMs: number }[]): void {
    for (const t of tasks) this.claimWait.observe({ tool: t.tool }, Math.max(0, t.waitedMs) / 1000);
  }

  private read(rates: readonly { tool: string; intervalMs: number }[]): Promise<QueueGauges> {
    const now = Date.now();
    if (!this.last || now - this.last.at > READ_TTL_MS) {
      const read = this.repo.gauges(rates);
      // A failed read is not kept: the next scrape reads again.
      read.catch(() => {
        if (this.last?.read === read) this.last = undefined;
      });
      this.last = { at: now, read };
    }
    return this.last.read;
  }
}
