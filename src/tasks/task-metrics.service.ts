import { Injectable, Logger } from '@nestjs/common';
import { Counter, Gauge, Histogram } from 'prom-client';
import { MetricsService } from '../metrics/metrics.service.js';
import { TasksRepository } from './tasks.repository.js';

export type FinishedStatus = 'completed' | 'failed' | 'cancelled' | 'expired';
export type CreationMode = 'immediate' | 'escalated';
export type RescueOutcome = 'failed_lease_lapsed' | 'failed_instance_gone';

/**
 * Task metrics (operations.md §4d). Labels are bounded: tool names come from the server's own registry,
 * statuses and modes from fixed sets; never a task or owner id. The live gauge is read from the database at
 * scrape time, so every instance reports the same, true number instead of its own in-process guess.
 */
@Injectable()
export class TaskMetrics {
  private readonly logger = new Logger(TaskMetrics.name);
  private readonly created: Counter<'tool' | 'mode'>;
  private readonly finished: Counter<'tool' | 'status'>;
  private readonly duration: Histogram<'tool' | 'status'>;
  private readonly stale: Counter<'tool'>;
  private readonly rescues: Counter<'tool' | 'outcome'>;
  private readonly writeFailures: Counter<'op'>;
  private readonly writeRetries: Counter<'op'>;

  constructor(metrics: MetricsService, repo: TasksRepository) {
    const registers = [metrics.registry];
    this.created = new Counter({
      name: 'mcp_tasks_created_total',
      help: 'Tasks created, by tool and mode (immediate: handshake-era task handle; escalated: after the inline window).',
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
      help: 'Tasks whose worker was lost (lapsed lease or a stopped instance), by tool and outcome.',
      labelNames: ['tool', 'outcome'] as const,
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
    repo.onCommitGroup((kind, size, fellBack) => {
      groupSize.observe({ kind }, size);
      if (fellBack) groupFallbacks.inc({ kind });
    });
    const logger = this.logger;
    new Gauge({
      name: 'mcp_tasks_active',
      help: 'Live tasks in the database (all instances), by status.',
      labelNames: ['status'] as const,
      registers,
      async collect() {
        try {
          const counts = await repo.countLiveByStatus();
          for (const [status, n] of Object.entries(counts)) this.set({ status }, n);
        } catch (err) {
          logger.warn(`mcp_tasks_active: ${err instanceof Error ? err.message : String(err)}`);
        }
      },
    });
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

  rescued(tool: string, outcome: RescueOutcome): void {
    this.rescues.inc({ tool, outcome });
  }
}
