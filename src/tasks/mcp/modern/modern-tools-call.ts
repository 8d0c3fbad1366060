import type { McpRequestContext } from '../../../protocol/request-context.js';
import { Injectable } from '@nestjs/common';
import { taskInput } from '../task-call.js';
import { ToolsCallBase } from '../tools-call.base.js';
import { InputRequiredSignal } from '../../../protocol/mrtr-input.js';
import { ProtocolError } from '../../../protocol/protocol.errors.js';
import { McpProtocolError } from '../../../tool-dispatch/tool-context.js';
import type { EscalationLink } from '../../execution/escalation-link.js';
import type { TaskOutcome, TaskSnapshot } from '../../task.types.js';
import { idempotencyRequestHash } from '../idempotency.js';
import { extensionDeclared, REQUIRED_EXTENSION, type Params } from '../task-params.js';
import { modernCreateTaskResult } from '../task-wire.js';
import { retryRethrow } from '../tool-retry-policy.js';

/**
 * tools/call of the 2026-07-28 era: one decision function (execution-decision.ts) decides whether a call
 * runs inline (McpMethodsService.callTool), is refused, or runs inline for a short window and then becomes
 * a task (TaskCreationService.runInlineThenTask).
 */
@Injectable()
export class ModernToolsCall extends ToolsCallBase {
  protected readonly era = 'modern' as const;

  protected async toolsCall(p: Params, ctx: McpRequestContext): Promise<Record<string, unknown>> {
    const tool = ctx.tool?.descriptor;
    // A legacy `task` param is unknown in this era: ignored, never an opt-in.
    if (!tool) return this.mcp.callTool(p, ctx);
    const decision = this.decide(
      {
        era: 'modern',
        taskSupport: tool.taskSupport,
        extensionDeclared: extensionDeclared(ctx.clientCapabilities),
      },
      tool.name,
    );
    if (decision.mode === 'refuse')
      throw ProtocolError.missingCapability(REQUIRED_EXTENSION, decision.message);
    if (decision.mode === 'inline') return this.mcp.callTool(p, ctx);

    // Synchronous MRTR rounds may precede the task; the answers gathered so far travel with it.
    const { requestState: _r, ...stored } = p;
    const requestParams = { ...stored, inputResponses: ctx.answers ?? {} };
    this.quotas.checkBytes('task_params_bytes', requestParams);
    const windowMs = decision.mode === 'inline_then_task' ? decision.windowMs : undefined;
    if (ctx.idempotencyKey !== undefined) {
      return this.modernKeyed(p, ctx, ctx.idempotencyKey, requestParams, decision.mode === 'task', windowMs);
    }
    const escalation = await this.counted(() =>
      this.creation.runInlineThenTask(
        taskInput(ctx, tool.name, requestParams, { era: 'modern' }),
        (signal, link) => this.inlineWork(p, ctx, signal, link),
        { signal: ctx.signal, windowMs },
      ),
    );
    switch (escalation.kind) {
      case 'aborted':
        throw ctx.signal.reason instanceof Error ? ctx.signal.reason : new Error('request closed');
      case 'task':
        return modernCreateTaskResult(escalation.task);
      case 'finished':
        return this.finishedTask(escalation.task, decision.mode === 'task');
      case 'inline':
        return this.inlineOutcome(
          escalation.outcome,
          decision.mode === 'task',
          requestParams,
          tool.name,
          ctx,
        );
    }
  }

  /** The tool call as the work of a modern-era task that may still answer inline. */
  private inlineWork(
    p: Params,
    ctx: McpRequestContext,
    signal: AbortSignal,
    link: EscalationLink,
  ): Promise<TaskOutcome> {
    return this.toolRunner.outcomeOf(() =>
      this.mcp.callTool(p, {
        ...ctx,
        signal,
        // Once escalated, the response carries the CreateTaskResult: progress goes to the task's
        // statusMessage, and notifications (progress, log) are no longer sent anywhere.
        notify: (method, params) => (link.escalated ? Promise.resolve() : ctx.notify(method, params)),
        reportTaskProgress: (u) => link.report(u),
        // The inline window is the task's first attempt: its checkpoints are kept for the task, and an
        // error the tool's retry policy retries makes the call a task queued for the retry.
        run: { attempt: 1, lastCheckpoint: undefined, checkpoint: (state) => link.checkpoint(state) },
        rethrow: retryRethrow(ctx.tool?.descriptor),
      }),
    );
  }

  /**
   * A modern call with an Idempotency-Key is recorded as a task from the start, so a repeat on any instance
   * finds it: created → its work runs as the task's run for the inline window, and an outcome inside the
   * window is recorded on the task and answered inline (an optional tool; a required one answers with the
   * task). A repeat answers from the task: finished → the same answer again; still live → its
   * CreateTaskResult.
   */
  private async modernKeyed(
    p: Params,
    ctx: McpRequestContext,
    key: string,
    requestParams: Params,
    mustBeTask: boolean,
    windowMs: number | undefined,
  ): Promise<Record<string, unknown>> {
    const tool = ctx.tool?.descriptor;
    if (!tool) throw new Error('a keyed task creation needs its resolved tool');
    const r = await this.counted(() =>
      this.creation.runInlineThenTask(
        taskInput(ctx, tool.name, requestParams, { era: 'modern', mode: 'immediate' }),
        (signal, link) => this.inlineWork(p, ctx, signal, link),
        {
          signal: ctx.signal,
          windowMs,
          key: { idempotencyKey: key, requestHash: idempotencyRequestHash(p) },
        },
      ),
    );
    switch (r.kind) {
      case 'task':
        return modernCreateTaskResult(r.task);
      case 'repeat':
      case 'finished':
        return this.finishedTask(r.task, mustBeTask);
      case 'inline':
        // A question parks the task (it exists already): the client answers it with tasks/update.
        if (mustBeTask || r.outcome.kind === 'input_required') return modernCreateTaskResult(r.task);
        if (r.outcome.kind === 'completed') return r.outcome.result;
        throw new McpProtocolError(r.outcome.error.code, r.outcome.error.message, r.outcome.error.data);
    }
  }

  /**
   * A queued task a worker ended inside the window, or a keyed call's repeat: an optional tool answers with
   * its result (or its error), exactly as an inline call would; a required tool, or a task that did not
   * complete or fail (cancelled, or still live), answers with the task.
   */
  private finishedTask(task: TaskSnapshot, mustBeTask: boolean): Record<string, unknown> {
    if (mustBeTask) return modernCreateTaskResult(task);
    if (task.status === 'completed' && task.result) return task.result;
    if (task.status === 'failed' && task.error) {
      throw new McpProtocolError(task.error.code, task.error.message, task.error.data);
    }
    return modernCreateTaskResult(task);
  }

  /**
   * The work ended inside the window. An optional tool answers plainly; a required tool still answers with a
   * task (created already finished), since its callers expect one. A question ends the round (MRTR).
   */
  private async inlineOutcome(
    outcome: TaskOutcome,
    mustBeTask: boolean,
    requestParams: Params,
    toolName: string,
    ctx: McpRequestContext,
  ): Promise<Record<string, unknown>> {
    if (outcome.kind === 'input_required') throw new InputRequiredSignal(outcome.requests);
    if (!mustBeTask) {
      if (outcome.kind === 'completed') return outcome.result;
      throw new McpProtocolError(outcome.error.code, outcome.error.message, outcome.error.data);
    }
    // Already finished: written once, in its final state (no run, no slot), and answered as it ended.
    const made = await this.counted(() =>
      this.creation.create(taskInput(ctx, toolName, requestParams, { era: 'modern', mode: 'escalated' }), {
        finished: outcome,
      }),
    );
    return modernCreateTaskResult(made.task);
  }
}
