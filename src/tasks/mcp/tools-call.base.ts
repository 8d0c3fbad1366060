import { Injectable, type OnModuleInit } from '@nestjs/common';
import { McpMethodsService } from '../../protocol/mcp-methods.service.js';
import { MethodRegistry } from '../../protocol/method-registry.js';
import type { Era, McpRequestContext } from '../../protocol/request-context.js';
import { QuotaService } from '../../quotas/quota.service.js';
import { TaskCreationService } from '../execution/task-creation.service.js';
import { TasksConfig } from '../tasks.config.js';
import { ToolGates } from '../sharing/tool-gates.service.js';
import { TasksService } from '../registry/tasks.service.js';
import { decideExecution, type CallSignals, type ExecutionDecision } from './execution-decision.js';
import { countedQuota } from './task-call.js';
import type { Params } from './task-params.js';
import { TaskToolRunner } from './task-tool-runner.service.js';

/**
 * What the tools/call of both eras share (legacy/legacy-tools-call.ts, modern/modern-tools-call.ts): what they
 * are built from, their registration for their era, the execution decision with the configured inline
 * window, and the quota error a refused creation becomes.
 */
@Injectable()
export abstract class ToolsCallBase implements OnModuleInit {
  protected abstract readonly era: Era;

  constructor(
    protected readonly creation: TaskCreationService,
    protected readonly toolRunner: TaskToolRunner,
    protected readonly mcp: McpMethodsService,
    protected readonly methods: MethodRegistry,
    protected readonly quotas: QuotaService,
    protected readonly config: TasksConfig,
    protected readonly gates: ToolGates,
    protected readonly tasks: TasksService,
  ) {}

  onModuleInit(): void {
    this.methods.register('tools/call', (p, ctx) => this.toolsCall(p, ctx), { eras: [this.era] });
  }

  protected abstract toolsCall(p: Params, ctx: McpRequestContext): Promise<Record<string, unknown>>;

  /** How a tools/call runs (see execution-decision.ts), with the configured inline window. */
  protected decide(call: CallSignals, toolName: string): ExecutionDecision {
    return decideExecution(call, toolName, { inlineWindowMs: this.config.TASK_INLINE_WINDOW_MS });
  }

  protected counted<T>(work: () => Promise<T>): Promise<T> {
    return countedQuota(this.quotas, work);
  }
}
