import { isJsonObject } from '../../../common/json.js';
import { Injectable, type OnModuleInit } from '@nestjs/common';
import { LifecycleService } from '../../../lifecycle/lifecycle.service.js';
import { JSONRPC } from '../../../protocol/json-rpc.js';
import { MethodRegistry } from '../../../protocol/method-registry.js';
import { ProtocolError } from '../../../protocol/protocol.errors.js';
import type { McpRequestContext } from '../../../protocol/request-context.js';
import { META } from '../../../protocol/versions.js';
import { QuotaService } from '../../../quotas/quota.service.js';
import { McpProtocolError } from '../../../tool-dispatch/tool-context.js';
import { TaskError, TaskErrorCode } from '../../tasks.errors.js';
import { TasksService } from '../../registry/tasks.service.js';
import { taskIdOf, type Params } from '../task-params.js';
import { TOOL_ERROR_RESULT } from '../task-tool-runner.service.js';
import { legacyTask } from '../task-wire.js';
import type { TaskSnapshot } from '../../task.types.js';

/** The error a legacy tasks/result gives for a task that ended cancelled (documented in the README). */
export const TASK_CANCELLED_CODE = -32000;

/**
 * What a finished task answers as the tools/call it stood for (tasks/result; a plain call of a tool behind
 * a gate, run through the queue): its CallToolResult, the tool's error result, or the JSON-RPC error it
 * failed with; `meta` is added to the result's _meta.
 */
export function legacyCallResult(t: TaskSnapshot, meta: Record<string, unknown>): Record<string, unknown> {
  if (t.status === 'completed') {
    const result = t.result ?? { content: [] };
    const own = isJsonObject(result._meta) ? result._meta : {};
    return {
      ...result,
      ...(Object.keys(meta).length > 0 || result._meta ? { _meta: { ...own, ...meta } } : {}),
    };
  }
  if (t.status === 'failed') {
    const e = t.error ?? { code: JSONRPC.INTERNAL_ERROR, message: 'Task failed' };
    const toolResult = isJsonObject(e.data) ? e.data[TOOL_ERROR_RESULT] : undefined;
    if (isJsonObject(toolResult)) {
      const own = isJsonObject(toolResult._meta) ? toolResult._meta : {};
      return {
        ...toolResult,
        ...(Object.keys(meta).length > 0 || toolResult._meta ? { _meta: { ...own, ...meta } } : {}),
      };
    }
    throw new McpProtocolError(e.code, e.message, e.data);
  }
  throw new McpProtocolError(TASK_CANCELLED_CODE, 'Task was cancelled', { taskId: t.id, status: t.status });
}

/** tasks/get, tasks/result, tasks/list and tasks/cancel of the legacy era (2025-11-25, core tasks). */
@Injectable()
export class LegacyTasksMethods implements OnModuleInit {
  constructor(
    private readonly tasks: TasksService,
    private readonly methods: MethodRegistry,
    private readonly quotas: QuotaService,
    private readonly lifecycle: LifecycleService,
  ) {}

  onModuleInit(): void {
    const legacy = { eras: ['legacy'] } as const;
    this.methods.register(
      'tasks/get',
      async (p, ctx) => legacyTask(await this.tasks.get(ctx.principal.id, taskIdOf(p))),
      legacy,
    );
    this.methods.register('tasks/result', (p, ctx) => this.result(p, ctx), legacy);
    this.methods.register('tasks/list', (p, ctx) => this.list(p, ctx), legacy);
    this.methods.register(
      'tasks/cancel',
      async (p, ctx) => legacyTask(await this.tasks.cancel(ctx.principal.id, taskIdOf(p))),
      legacy,
    );
  }

  private async result(p: Params, ctx: McpRequestContext): Promise<Record<string, unknown>> {
    const taskId = taskIdOf(p);
    const release = this.quotas.acquire('result_waiters', ctx.principal.id);
    // A drain ends the wait with an answer the client repeats (on another instance, through a balancer)
    // rather than holding it until the grace period cuts the connection.
    const drained = new AbortController();
    const offDrain = this.lifecycle.onDrain(() => drained.abort());
    let waited;
    try {
      waited = await this.tasks.waitForTerminal(ctx.principal.id, taskId, {
        signal: AbortSignal.any([ctx.signal, drained.signal]),
      });
    } finally {
      offDrain();
      release();
    }
    if (waited.kind === 'aborted' && !ctx.signal.aborted) {
      throw new McpProtocolError(
        JSONRPC.SERVER_ERROR,
        'The server is restarting and the task is still running; call tasks/result again',
        { taskId, status: waited.task.status },
      );
    }
    const related = { [META.RELATED_TASK]: { taskId } };
    switch (waited.kind) {
      case 'gone':
        throw new TaskError(TaskErrorCode.TASK_NOT_FOUND, 'Task not found');
      case 'aborted':
        throw ctx.signal.reason instanceof Error ? ctx.signal.reason : new Error('request cancelled');
      case 'timeout':
        throw new McpProtocolError(
          JSONRPC.SERVER_ERROR,
          'The task is still running; call tasks/result again',
          { taskId, status: waited.task.status },
        );
      case 'terminal':
        return legacyCallResult(waited.task, related);
    }
  }

  private async list(p: Params, ctx: McpRequestContext): Promise<Record<string, unknown>> {
    const cursor = p.cursor;
    if (cursor !== undefined && typeof cursor !== 'string')
      throw ProtocolError.invalidParams('Invalid cursor');
    const page = await this.tasks.list(ctx.principal.id, cursor);
    return { tasks: page.tasks.map(legacyTask), ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}) };
  }
}
