import type { AuditTrail } from '../../audit/audit-trail.service.js';
import type { LimitsPolicy } from '../../tool-dispatch/tool-limits.js';
import type { ToolDescriptor } from '../../tool-dispatch/tool-dispatch.types.js';
import type { PauseChange, ToolQueueCounts, ToolQueueRepository } from '../store/tool-queue.repository.js';

/** Why a pause or resume was refused. */
export class QueueControlError extends Error {
  constructor(
    readonly reason: 'unknown-tool' | 'never-a-task',
    message: string,
  ) {
    super(message);
  }
}

/** One tool's queue as `queue status` and the console show it. */
export interface ToolQueueView {
  tool: string;
  paused: boolean;
  running: number;
  /** Tasks waiting to run: all, and by why (ToolQueueCounts.waiting says what each reason is). */
  waiting: number;
  waitingBy: ToolQueueCounts['waiting'];
  /** The limits the tool declares (none: {}), with what they have in use cluster-wide. */
  limits: LimitsPolicy;
  /** Tasks of a tool this server no longer has (a paused one, or ones created before a deploy). */
  unknown: boolean;
}

/** How a tool's declared limits read, with what they have in use: `2/2 at once, 1 per key`; '–' for none. */
export function limitsText(t: ToolQueueView): string {
  const parts: string[] = [];
  if (t.limits.concurrency !== undefined) parts.push(`${t.running}/${t.limits.concurrency} at once`);
  if (t.limits.perKey) parts.push(`${t.limits.perKey.concurrency} per ${t.limits.perKey.argument}`);
  if (t.limits.rate) parts.push(`${t.limits.rate.starts} starts per ${t.limits.rate.intervalMs} ms`);
  return parts.length > 0 ? parts.join(', ') : '–';
}

/** The queue's status: by tool, and by fairness key. */
export interface QueueStatus {
  tools: ToolQueueView[];
  fairnessKeys: { key: string; running: number; waiting: number }[];
}

/**
 * Pausing, resuming and reading a tool's queue, for the operator CLI and the console alike: it checks the
 * tool against this deployment's catalog (a tool that does not exist, or that can never be a task, is
 * refused, naming it), and records each change in the audit trail in the transaction that makes it.
 */
export class QueueControl {
  constructor(
    private readonly repo: ToolQueueRepository,
    private readonly audit: AuditTrail,
    private readonly tools: () => readonly ToolDescriptor[],
  ) {}

  /** Pauses `tool`'s queue on every instance; `changed` false when it already was paused. */
  pause(tool: string, actor: string): Promise<PauseChange> {
    this.taskTool(tool);
    return this.set(tool, true, actor);
  }

  /** Resumes `tool`'s queue; a tool no longer served can still be resumed while it is paused. */
  async resume(tool: string, actor: string): Promise<PauseChange> {
    const paused = (await this.repo.pausedTools()).includes(tool);
    if (!paused) this.taskTool(tool);
    return this.set(tool, false, actor);
  }

  async status(): Promise<QueueStatus> {
    const rows = await this.repo.status();
    const served = new Map(this.tools().map((t) => [t.name, t]));
    const byTool = new Map(rows.tools.map((t) => [t.tool, t]));
    const names = new Set([
      ...[...served.values()].filter((t) => t.taskSupport !== 'forbidden').map((t) => t.name),
      ...byTool.keys(),
    ]);
    const tools = [...names].sort().map((name): ToolQueueView => {
      const r = byTool.get(name);
      const waitingBy = r?.waiting ?? { paused: 0, limit: 0, claimable: 0, delayed: 0, lapsed: 0 };
      return {
        tool: name,
        paused: r?.paused ?? false,
        running: r?.running ?? 0,
        waiting: Object.values(waitingBy).reduce((a, b) => a + b, 0),
        waitingBy,
        limits: served.get(name)?.limits ?? {},
        unknown: !served.has(name),
      };
    });
    return {
      tools,
      fairnessKeys: rows.keys.map((k) => ({ key: k.key, running: k.running, waiting: k.waiting })),
    };
  }

  /** The tool's descriptor when it can run as a task; else QueueControlError naming it. */
  private taskTool(tool: string): ToolDescriptor {
    const d = this.tools().find((t) => t.name === tool);
    if (!d)
      throw new QueueControlError('unknown-tool', `no tool named ${JSON.stringify(tool)} on this server`);
    if (d.taskSupport === 'forbidden') {
      throw new QueueControlError(
        'never-a-task',
        `tool ${JSON.stringify(tool)} never runs as a task (taskSupport 'forbidden'): it has no queue to pause`,
      );
    }
    return d;
  }

  private set(tool: string, paused: boolean, actor: string): Promise<PauseChange> {
    return this.repo.setPaused(tool, paused, actor, (m, change) =>
      this.audit.record(m, {
        kind: paused ? 'queue.paused' : 'queue.resumed',
        tool,
        detail: { tasks: change.tasks },
      }),
    );
  }
}
