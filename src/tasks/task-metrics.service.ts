import { errorMessage } from '../common/error-message.js';
import { Injectable, Logger, Optional, type OnModuleInit } from '@nestjs/common';
import { Counter, Gauge, Histogram } from 'prom-client';
import { MetricsService } from '../metrics/metrics.service.js';
import { ToolRegistry } from '../tool-dispatch/tool-registry.service.js';
import { TaskCommitGroups } from './store/task-commit-groups.js';
import { TasksAdminRepository } from './store/tasks-admin.repository.js';

export type FinishedStatus = 'completed' | 'failed' | 'cancelled' | 'expired';
export type CreationMode = 'immediate' | 'escalated' | 'redriven';
/** A lost worker's task re-queued for its next attempt (resumable, budget left), or failed. */
export type RescueOutcome = 'requeued' | 'failed';

const FINISHED_STATUSES: readonly FinishedStatus[] = ['completed', 'failed', 'cancelled', 'expired'];
const CREATION_MODES: readonly CreationMode[] = ['immediate', 'escalated', 'redriven'];
const RESCUE_OUTCOMES: readonly RescueOutcome[] = ['requeued', 'failed'];
/** The final worker writes (task-runner.service.ts WriteOp). */
const WRITE_OPS = ['complete', 'fail', 'park', 'requeue'] as const;
export type RetryOutcome = 'scheduled' | 'exhausted';
const RETRY_OUTCOMES: readonly RetryOutcome[] = ['scheduled', 'exhausted'];
const COMMIT_GROUP_KINDS = ['create', 'finish'] as const;

/**
 * Task metrics (operations.md §4d). Labels are bounded: tool names come from the server's own registry,
 * statuses and modes from fixed sets; never a task or owner id. The live gauge is read from the database at
 * scrape time, so every instance reports the same, true number instead of its own in-process guess.
 */
@Injectable()
export class TaskMetrics implements OnModuleInit {
  private readonly logger = new Logger(TaskMetrics.name);
  private readonly created: Counter<'tool' | 'mode'>;
  private readonly finished: Counter<'tool' | 'status'>;
  private readonly duration: Histogram<'tool' | 'status'>;
  private readonly stale: Counter<'tool'>;
  private readonly rescues: Counter<'tool' | 'outcome'>;
  private readonly handovers: Counter<'tool'>;
  private readonly writeFailures: Counter<'op'>;
  private readonly writeRetries: Counter<'op'>;
  private readonly retries: Counter<'tool' | 'outcome'>;
  private readonly runsStarted: Counter<'tool'>;
  private readonly claims: Counter;
  private readonly queueWait: Histogram;
  private readonly registers: MetricsService['registry'][];

  constructor(
    metrics: MetricsService,
    admin: TasksAdminRepository,
    groups: TaskCommitGroups,
    // Absent where no tools are registered (the admin CLI builds this class by hand).
    @Optional() private readonly tools?: ToolRegistry,
  ) {
    const registers = [metrics.registry];
    this.registers = registers;
    this.runsStarted = new Counter({
      name: 'mcp_task_runs_started_total',
      help: 'Task runs started on this instance, by tool: first runs (leased at creation, adopted after the inline window, claimed from the queue) and every later run (retry, hand-over, rescue, resume).',
      labelNames: ['tool'] as const,
      registers,
    });
    this.claims = new Counter({
      name: 'mcp_task_claims_total',
      help: 'Queued tasks this instance claimed from the queue.',
      registers,
    });
    this.queueWait = new Histogram({
      name: 'mcp_task_queue_wait_seconds',
      help: 'Time a task waited claimable in the queue (available_at to its claim, database clock).',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60, 300, 900, 3600],
      registers,
    });
    this.created = new Counter({
      name: 'mcp_tasks_created_total',
      help:
        'Tasks created by this server, by tool and mode (immediate: legacy task handle; escalated: after the ' +
        "inline window; redriven: an operator's redrive in the console; the CLI's redrives are in the audit trail).",
      labelNames: ['tool', 'mode'] as const,
      registers,
    });
    this.finished = new Counter({
      name: 'mcp_tasks_finished_total',
      help: 'Tasks that reached a terminal state on this instance, by tool and status (expired is failed by expiry).',
      labelNames: ['tool', 'status'] as const,
      registers,
    });
    this.duration = new Histogram({
      name: 'mcp_task_duration_seconds',
      help: 'Time from task creation to its terminal state, by tool and status.',
      labelNames: ['tool', 'status'] as const,
      buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14400, 86400],
      registers,
    });
    this.stale = new Counter({
      name: 'mcp_task_stale_completions_total',
      help: 'Worker writes dropped because the task was no longer theirs (cancelled, expired, rescued, resumed elsewhere).',
      labelNames: ['tool'] as const,
      registers,
    });
    this.rescues = new Counter({
      name: 'mcp_task_rescues_total',
      help: 'Tasks whose worker was lost (lapsed lease or a stopped instance), by tool and outcome (requeued: a resumable task queued for its next attempt; failed).',
      labelNames: ['tool', 'outcome'] as const,
      registers,
    });
    this.handovers = new Counter({
      name: 'mcp_task_handovers_total',
      help: 'Runs of resumable tasks this instance released to the queue at shutdown (claimed elsewhere, never failed), by tool.',
      labelNames: ['tool'] as const,
      registers,
    });
    this.writeFailures = new Counter({
      name: 'mcp_task_write_failures_total',
      help: 'Final worker writes (complete, fail, park) that could not be written after their retries; the task then fails "worker lost".',
      labelNames: ['op'] as const,
      registers,
    });
    this.writeRetries = new Counter({
      name: 'mcp_task_write_retries_total',
      help: 'Extra attempts final worker writes needed before they landed, by op.',
      labelNames: ['op'] as const,
      registers,
    });
    this.retries = new Counter({
      name: 'mcp_task_retries_total',
      help: 'Task runs that failed with an error their retry policy retries, by tool and outcome (scheduled: re-queued for the next attempt after its backoff; exhausted: no attempts left, the task failed).',
      labelNames: ['tool', 'outcome'] as const,
      registers,
    });
    const groupSize = new Histogram({
      name: 'mcp_task_commit_group_size',
      help: 'Task writes committed together in one transaction (group commit), by kind (create, finish).',
      labelNames: ['kind'] as const,
      buckets: [1, 2, 4, 8, 16, 32, 64, 128],
      registers,
    });
    const groupFallbacks = new Counter({
      name: 'mcp_task_commit_group_fallbacks_total',
      help: 'Commit groups that could not commit as one (a limit, a lock timeout, a lost connection) and ran each write alone.',
      labelNames: ['kind'] as const,
      registers,
    });
    // Every known label value exists at 0 from boot (the tool names once the registry is built, see
    // onModuleInit): increase() and rate() only see a change between two samples, so a counter whose first
    // sample is already 2 (the rescues of a restarting instance) would otherwise never count.
    for (const op of WRITE_OPS) {
      this.writeFailures.inc({ op }, 0);
      this.writeRetries.inc({ op }, 0);
    }
    for (const kind of COMMIT_GROUP_KINDS) groupFallbacks.inc({ kind }, 0);
    const onGroup = (kind: (typeof COMMIT_GROUP_KINDS)[number], size: number, fellBack: boolean): void => {
      groupSize.observe({ kind }, size);
      if (fellBack) groupFallbacks.inc({ kind });
    };
    groups.onGroup(onGroup);
    const logger = this.logger;
    new Gauge({
      name: 'mcp_tasks_active',
      help: 'Live tasks in the database (all instances), by status.',
      labelNames: ['status'] as const,
      registers,
      async collect() {
        try {
          const counts = await admin.countLiveByStatus();
          for (const [status, n] of Object.entries(counts)) this.set({ status }, n);
        } catch (err) {
          // No reading, no series (Prometheus marks it stale) rather than the last count from before.
          this.reset();
          logger.warn(`mcp_tasks_active: ${errorMessage(err)}`);
        }
      },
    });
  }

  /** Runs after the tool registry's own onModuleInit (TasksModule imports ToolDispatchModule). */
  onModuleInit(): void {
    this.knownTools((this.tools?.listTools() ?? []).map((t) => t.name));
  }

  /** Creates each tool's series at 0, before the janitor's startup recovery can count anything. */
  knownTools(names: readonly string[]): void {
    for (const tool of names) {
      for (const mode of CREATION_MODES) this.created.inc({ tool, mode }, 0);
      for (const status of FINISHED_STATUSES) {
        this.finished.inc({ tool, status }, 0);
        this.duration.zero({ tool, status });
      }
      this.stale.inc({ tool }, 0);
      this.runsStarted.inc({ tool }, 0);
      for (const outcome of RESCUE_OUTCOMES) this.rescues.inc({ tool, outcome }, 0);
      this.handovers.inc({ tool }, 0);
      for (const outcome of RETRY_OUTCOMES) this.retries.inc({ tool, outcome }, 0);
    }
  }

  taskCreated(tool: string, mode: CreationMode): void {
    this.created.inc({ tool, mode });
  }

  taskFinished(task: { toolName: string; createdAt: Date }, status: FinishedStatus): void {
    this.finished.inc({ tool: task.toolName, status });
    this.duration.observe(
      { tool: task.toolName, status },
      Math.max(0, (Date.now() - task.createdAt.getTime()) / 1000),
    );
  }

  runStarted(tool: string): void {
    this.runsStarted.inc({ tool });
  }

  /** A claim of `n` tasks, each having waited `waitedMs` (database clock) since it became claimable. */
  claimed(waitedMs: readonly number[]): void {
    if (waitedMs.length === 0) return;
    this.claims.inc(waitedMs.length);
    for (const ms of waitedMs) this.queueWait.observe(Math.max(0, ms) / 1000);
  }

  /**
   * The queue's gauges, read at scrape time: its depth from the database (every instance reports the same
   * true number), and this instance's worker slots from the claimer.
   */
  watchQueue(sources: {
    depth: () => Promise<{ ready: number; delayed: number }>;
    slots: () => { busy: number; free: number };
  }): void {
    const registers = this.registers;
    const logger = this.logger;
    new Gauge({
      name: 'mcp_task_queue_depth',
      help: 'Queued tasks (working, no instance) in the database, by state: ready (claimable now) or delayed (a retry backoff not over yet).',
      labelNames: ['state'] as const,
      registers,
      async collect() {
        try {
          const d = await sources.depth();
          this.set({ state: 'ready' }, d.ready);
          this.set({ state: 'delayed' }, d.delayed);
        } catch (err) {
          this.reset();
          logger.warn(`mcp_task_queue_depth: ${errorMessage(err)}`);
        }
      },
    });
    new Gauge({
      name: 'mcp_task_worker_slots',
      help: 'Task run slots of this instance (TASK_WORKER_CONCURRENCY; 0 on INSTANCE_ROLE=web), by state: busy or free.',
      labelNames: ['state'] as const,
      registers,
      collect() {
        const s = sources.slots();
        this.set({ state: 'busy' }, s.busy);
        this.set({ state: 'free' }, s.free);
      },
    });
  }

  staleWrite(tool: string): void {
    this.stale.inc({ tool });
  }

  writeFailed(op: string): void {
    this.writeFailures.inc({ op });
  }

  /** A write that landed on attempt `attempts` (> 1). */
  writeRetried(op: string, attempts: number): void {
    this.writeRetries.inc({ op }, attempts - 1);
  }

  taskRetried(tool: string, outcome: RetryOutcome): void {
    this.retries.inc({ tool, outcome });
  }

  rescued(tool: string, outcome: RescueOutcome): void {
    this.rescues.inc({ tool, outcome });
  }

  handedOver(tool: string): void {
    this.handovers.inc({ tool });
  }
}
