import { createHash } from 'node:crypto';
import {
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
  type OnModuleInit,
} from '@nestjs/common';
import { PgBusService } from '../../bus/pg-bus.service.js';
import { errorMessage } from '../../common/error-message.js';
import { limitKeyOf, type LimitsPolicy } from '../../tool-dispatch/tool-limits.js';
import { ToolRegistry } from '../../tool-dispatch/tool-registry.service.js';
import { ToolQueueRepository } from '../store/tool-queue.repository.js';
import { TOOL_QUEUE_CHANNEL } from '../task-queue.js';
import { TasksConfig } from '../tasks.config.js';
import { fairnessKeyOf } from './fairness.js';

/** What a new task of a tool carries for sharing the queue (TaskCreationRepository's NewTask fields). */
export interface QueueFields {
  fairnessKey: string;
  /** Tools that declare limits: the per-key value ('' without a per-key limit); null otherwise. */
  limitKey: string | null;
  /** Its tool's queue is paused (as this instance last heard): it is created waiting. */
  paused: boolean;
}

/**
 * What this instance knows of the queue's gates: the limits each tool declares (from the tool registry) and
 * which tools' queues are paused (read at boot, kept current by TOOL_QUEUE_CHANNEL and re-read after a bus
 * reconnect). A run of a tool behind a gate must start through the claim, which applies the gates exactly
 * under the claim lock: `mustQueue` is how every other way a run starts (a creation on a free slot, a
 * 2026-07-28 inline window, a resume, a lease whose commit answer was lost) knows to queue instead.
 */
@Injectable()
export class ToolGates implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(ToolGates.name);
  private paused = new Set<string>();
  /**
   * The limits each tool declares, read once from the registry (fixed after boot): asked on every call and
   * every run's end, so it adds no lookup to a tools/call's one.
   */
  private readonly limits = new Map<string, LimitsPolicy>();
  private readonly offs: (() => void)[] = [];

  constructor(
    private readonly tools: ToolRegistry,
    private readonly repo: ToolQueueRepository,
    private readonly bus: PgBusService,
    private readonly config: TasksConfig,
  ) {}

  /** Runs after the tool registry's own onModuleInit (TasksModule imports ToolDispatchModule). */
  onModuleInit(): void {
    for (const t of this.tools.listTools()) if (t.limits) this.limits.set(t.name, t.limits);
  }

  async onApplicationBootstrap(): Promise<void> {
    this.offs.push(
      this.bus.subscribe(TOOL_QUEUE_CHANNEL, (payload) => {
        const { tool, paused } = payload;
        if (typeof tool !== 'string' || typeof paused !== 'boolean') return;
        if (paused) this.paused.add(tool);
        else this.paused.delete(tool);
      }),
      this.bus.onResync(() => void this.reload()),
    );
    await this.reload();
  }

  onModuleDestroy(): void {
    for (const off of this.offs.splice(0)) off();
  }

  /** The limits `tool` declares (undefined: none, or no such tool here). */
  limitsOf = (tool: string): LimitsPolicy | undefined => this.limits.get(tool);

  /** Whether `tool`'s queue is paused, as this instance last heard (the claim reads it exactly). */
  isPaused(tool: string): boolean {
    return this.paused.has(tool);
  }

  /** Whether a run of `tool` may only start through the claim: it declares limits, or its queue is paused. */
  mustQueue(tool: string): boolean {
    return this.paused.has(tool) || this.limitsOf(tool) !== undefined;
  }

  /** The sharing fields of a new task of `tool` called with `args` by `ownerId` (as `principal`). */
  queueFields(
    tool: string,
    args: Record<string, unknown> | undefined,
    ownerId: string,
    principal: Record<string, unknown> | null | undefined,
  ): QueueFields {
    const limits = this.limitsOf(tool);
    let limitKey: string | null = null;
    if (limits) {
      const key = limitKeyOf(limits, args);
      // A value too long to keep as it is counts under its hash: equal values still share one key.
      limitKey =
        key ??
        `sha256:${createHash('sha256')
          .update(String(args?.[limits.perKey?.argument ?? '']))
          .digest('hex')}`;
    }
    return {
      fairnessKey: fairnessKeyOf(this.config.TASK_FAIR_SHARE, ownerId, principal),
      limitKey,
      paused: this.paused.has(tool),
    };
  }

  /**
   * A run of `tool` ended on this instance and its outcome is written: the tasks its limits hold are looked
   * at again at once, on every instance.
   */
  runEnded(tool: string): void {
    if (this.limitsOf(tool) === undefined) return;
    this.repo.releaseLimitHolds(tool).catch((err: unknown) => {
      // They are looked at again when the lease they wait behind would lapse.
      this.logger.warn(`letting go the tasks ${tool}'s limits hold failed: ${errorMessage(err)}`);
    });
  }

  private async reload(): Promise<void> {
    try {
      this.paused = new Set(await this.repo.pausedTools());
    } catch (err) {
      this.logger.warn(`reading the paused tools failed: ${errorMessage(err)}`);
    }
  }
}
