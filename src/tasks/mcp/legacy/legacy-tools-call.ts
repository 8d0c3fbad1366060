import type { McpRequestContext } from '../../../protocol/request-context.js';
import { Injectable } from '@nestjs/common';
import { taskInput } from '../task-call.js';
import { ToolsCallBase } from '../tools-call.base.js';
import { isJsonObject } from '../../../common/json.js';
import { JSONRPC } from '../../../protocol/json-rpc.js';
import { ProtocolError } from '../../../protocol/protocol.errors.js';
import type { TaskSnapshot } from '../../task.types.js';
import { idempotencyRequestHash } from '../idempotency.js';
import type { Params } from '../task-params.js';
import { legacyTask } from '../task-wire.js';
import { legacyCallResult } from './legacy-tasks.methods.js';

/** How long a plain call waiting for its queued task waits between two looks (it waits until it ends). */
const QUEUED_CALL_WAIT_MS = 60_000;

/**
 * tools/call of the 2025-11-25 era: one decision function (execution-decision.ts) decides whether a call
 * runs inline (McpMethodsService.callTool), is refused, or becomes a task at once, answered with its handle.
 */
@Injectable()
export class LegacyToolsCall extends ToolsCallBase {
  protected readonly era = 'legacy' as const;

  protected async toolsCall(p: Params, ctx: McpRequestContext): Promise<Record<string, unknown>> {
    const tool = ctx.tool?.descriptor;
    if (!tool) return this.mcp.callTool(p, ctx);
    if (p.task !== undefined && !isJsonObject(p.task))
      throw ProtocolError.invalidParams('params.task must be an object');
    const decision = this.decide(
      { era: 'legacy', taskSupport: tool.taskSupport, taskRequested: p.task !== undefined },
      tool.name,
    );
    switch (decision.mode) {
      case 'refuse':
        throw new ProtocolError(JSONRPC.METHOD_NOT_FOUND, decision.message);
      case 'inline':
      case 'inline_then_task':
        // A tool behind a gate (limits, a paused queue) runs only through the claim, even when called
        // without a task: the call waits for its task there (tool-authoring.md, "Sharing the queue").
        if (this.gates.mustQueue(tool.name)) return this.throughQueue(p, ctx, tool.name);
        return this.mcp.callTool(p, ctx);
      case 'task': {
        const requested = isJsonObject(p.task) ? p.task.ttl : undefined;
        if (
          requested !== undefined &&
          requested !== null &&
          (typeof requested !== 'number' || requested <= 0)
        ) {
          throw ProtocolError.invalidParams('params.task.ttl must be a positive number of milliseconds');
        }
        this.quotas.checkBytes('task_params_bytes', p);
        const input = taskInput(ctx, tool.name, p, {
          era: 'legacy',
          mode: 'immediate',
          sessionId: ctx.session?.id ?? null,
          requestedTtlMs: typeof requested === 'number' ? requested : null,
        });
        // Started here when a slot is free; otherwise queued for the first instance with one.
        const beforeStart = (created: TaskSnapshot): void =>
          this.toolRunner.rememberPrincipal(
            created.id,
            ctx.principal,
            ctx.session
              ? { clientCapabilities: ctx.clientCapabilities, protocolVersion: ctx.protocolVersion }
              : undefined,
            ctx.tool,
          );
        const key = ctx.idempotencyKey;
        // With a key, a repeat of the same call answers with the task the key names, from any instance; no
        // second run.
        const made = await this.counted(() =>
          this.creation.create(input, {
            beforeStart,
            key:
              key === undefined ? undefined : { idempotencyKey: key, requestHash: idempotencyRequestHash(p) },
          }),
        );
        return { task: legacyTask(made.task) };
      }
    }
  }

  /**
   * A plain (non-task) call of a tool behind a gate: queued as a task of the caller's, and answered as that
   * task ends, exactly as tasks/result would answer. The caller leaving cancels it (nobody would collect it).
   */
  private async throughQueue(
    p: Params,
    ctx: McpRequestContext,
    toolName: string,
  ): Promise<Record<string, unknown>> {
    this.quotas.checkBytes('task_params_bytes', p);
    const input = taskInput(ctx, toolName, p, {
      era: 'legacy',
      mode: 'immediate',
      sessionId: ctx.session?.id ?? null,
    });
    const { task } = await this.counted(() => this.creation.create(input, { placement: 'queue' }));
    for (;;) {
      const waited = await this.tasks.waitForTerminal(ctx.principal.id, task.id, {
        signal: ctx.signal,
        timeoutMs: QUEUED_CALL_WAIT_MS,
      });
      if (waited.kind === 'terminal') return legacyCallResult(waited.task, {});
      if (waited.kind === 'gone')
        throw new ProtocolError(JSONRPC.INTERNAL_ERROR, 'The task of this call expired');
      if (waited.kind === 'aborted') {
        await this.tasks.cancel(ctx.principal.id, task.id).catch(() => undefined);
        throw ctx.signal.reason instanceof Error ? ctx.signal.reason : new Error('request cancelled');
      }
    }
  }
}
