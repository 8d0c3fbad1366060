import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import { JSONRPC } from '../protocol/json-rpc.js';
import { McpMethodsService } from '../protocol/mcp-methods.service.js';
import { InputRequiredSignal } from '../protocol/mrtr-input.js';
import { ProtocolError } from '../protocol/protocol.errors.js';
import type { RequestContext } from '../protocol/request-context.js';
import { META, TASKS_EXTENSION } from '../protocol/versions.js';
import type { Principal } from '../principals/principal.js';
import type { TaskOutcome } from '../tasks/task.types.js';
import { legacyTask, modernCreateTaskResult, modernDetailedTask } from '../tasks/task-wire.js';
import { TaskError, TaskErrorCode } from '../tasks/tasks.errors.js';
import { TasksService } from '../tasks/tasks.service.js';
import { TaskRunnerService } from '../tasks/task-runner.service.js';
import { inTaskSpan, startTaskSpan } from '../telemetry/task-spans.js';
import type { QuotaName } from '../quotas/quota.errors.js';
import { QuotaService } from '../quotas/quota.service.js';
import { McpProtocolError } from '../tool-dispatch/tool-context.js';
import { LegacyMcpHandler } from './legacy-mcp.handler.js';
import { ModernMcpHandler } from './modern-mcp.handler.js';
import { STANDALONE_STREAM, StreamHub } from './stream-hub.service.js';
import { TaskExecutor, TOOL_ERROR_RESULT } from './task-executor.service.js';
import { TaskSubscription } from './task-subscription.js';

type Params = Record<string, unknown>;

function isObject(v: unknown): v is Params {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function taskIdOf(p: Params): string {
  if (typeof p.taskId !== 'string' || p.taskId.length === 0) {
    throw ProtocolError.invalidParams('params.taskId must be a non-empty string');
  }
  return p.taskId;
}

/** The error a handshake-era tasks/result gives for a task that ended cancelled (documented in the README). */
export const TASK_CANCELLED_CODE = -32000;

const REQUIRED_EXTENSION = { extensions: { [TASKS_EXTENSION]: {} } };

/**
 * The task protocol of both eras on top of the registry: tools/call decides (one decision function) whether a
 * call runs inline, is refused, becomes a task at once (handshake era) or inline for a short window and then
 * a task (extension era); tasks/* methods render the registry's snapshots in each era's vocabulary; changes
 * from any instance become notifications/tasks/status (handshake sessions) and notifications/tasks
 * (extension subscriptions).
 */
@Injectable()
export class TasksProtocolService implements OnModuleInit {
  private readonly logger = new Logger(TasksProtocolService.name);

  constructor(
    private readonly tasks: TasksService,
    private readonly runner: TaskRunnerService,
    private readonly executor: TaskExecutor,
    private readonly mcp: McpMethodsService,
    private readonly legacy: LegacyMcpHandler,
    private readonly modern: ModernMcpHandler,
    private readonly hub: StreamHub,
    private readonly quotas: QuotaService,
    private readonly lifecycle: LifecycleService,
  ) {}

  onModuleInit(): void {
    this.legacy.register('tools/call', (p, ctx) => this.legacyToolsCall(p, ctx));
    this.legacy.register('tasks/get', async (p, ctx) =>
      legacyTask(await this.tasks.get(ctx.principal.id, taskIdOf(p))),
    );
    this.legacy.register('tasks/result', (p, ctx) => this.legacyResult(p, ctx));
    this.legacy.register('tasks/list', (p, ctx) => this.legacyList(p, ctx));
    this.legacy.register('tasks/cancel', async (p, ctx) =>
      legacyTask(await this.tasks.cancel(ctx.principal.id, taskIdOf(p))),
    );
    this.modern.register('tools/call', (p, ctx) => this.modernToolsCall(p, ctx));
    this.modern.register('tasks/get', async (p, ctx) => {
      this.requireExtension(ctx);
      return modernDetailedTask(await this.tasks.get(ctx.principal.id, taskIdOf(p)));
    });
    this.modern.register('tasks/update', (p, ctx) => this.modernUpdate(p, ctx));
    this.modern.register('tasks/cancel', (p, ctx) => this.modernCancel(p, ctx));
    this.modern.registerListenFilter('taskIds', (filter, ctx, send) => this.listenTasks(filter, ctx, send));
    // Handshake era: the status notification is logged on the session's GET stream inside the very
    // transaction that changes the task (an outbox). It exists exactly when the change commits, whichever
    // instance made it and whatever happens to any LISTEN connection; the stream's holder, on any instance,
    // drains it when woken at commit or, if that NOTIFY is lost, at the resync after its bus reconnects.
    this.tasks.onChangeInTransaction(async (tx, task) => {
      if (task.era !== 'legacy' || !task.sessionId) return;
      const sessionId = task.sessionId;
      await inTaskSpan(
        'notifications/tasks/status',
        task,
        async () =>
          this.hub.publishInTransaction(tx, sessionId, STANDALONE_STREAM, {
            jsonrpc: '2.0',
            method: 'notifications/tasks/status',
            params: legacyTask(task),
          }),
        { 'mcp.method.name': 'notifications/tasks/status', 'mcp.task.status': task.status },
      );
    });
    // The change's own NOTIFY (at the same commit) is the wake-up for the session's GET stream.
    this.tasks.onTaskChanged((change) => {
      if (change.era === 'legacy' && change.sessionId)
        this.hub.wakeHolder(change.sessionId, STANDALONE_STREAM);
    });
  }

  /** A per-owner quota the registry enforces in its transaction becomes a counted quota error. */
  private async counted<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      if (err instanceof TaskError && err.quota) {
        const q = err.quota;
        throw this.quotas.refuse(q.quota as QuotaName, err.message, q.limit, q.setting);
      }
      throw err;
    }
  }

  // ---------------------------------------------------------------- handshake era (2025-11-25)

  private async legacyToolsCall(p: Params, ctx: RequestContext): Promise<Record<string, unknown>> {
    const name = typeof p.name === 'string' ? p.name : '';
    const tool = this.mcp.getTool(name);
    if (!tool) return this.mcp.handle('tools/call', p, ctx);
    if (p.task !== undefined && !isObject(p.task))
      throw ProtocolError.invalidParams('params.task must be an object');
    const decision = this.tasks.decide(
      { era: 'legacy', taskSupport: tool.taskSupport, taskRequested: p.task !== undefined },
      tool.name,
    );
    switch (decision.mode) {
      case 'refuse':
        throw new ProtocolError(JSONRPC.METHOD_NOT_FOUND, decision.message);
      case 'inline':
      case 'inline_then_task':
        return this.mcp.handle('tools/call', p, ctx);
      case 'task': {
        const requested = isObject(p.task) ? p.task.ttl : undefined;
        if (
          requested !== undefined &&
          requested !== null &&
          (typeof requested !== 'number' || requested <= 0)
        ) {
          throw ProtocolError.invalidParams('params.task.ttl must be a positive number of milliseconds');
        }
        this.quotas.checkBytes('task_params_bytes', p);
        const task = await this.counted(() =>
          this.tasks.create({
            ownerId: ctx.principal.id,
            sessionId: ctx.session?.id ?? null,
            era: 'legacy',
            toolName: tool.name,
            requestParams: p,
            requestedTtlMs: typeof requested === 'number' ? requested : null,
            mode: 'immediate',
          }),
        );
        this.executor.rememberPrincipal(
          task.id,
          ctx.principal,
          ctx.session
            ? { clientCapabilities: ctx.clientCapabilities, protocolVersion: ctx.protocolVersion }
            : undefined,
        );
        this.runner.start(task);
        return { task: legacyTask(task) };
      }
    }
  }

  private async legacyResult(p: Params, ctx: RequestContext): Promise<Record<string, unknown>> {
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
      case 'terminal': {
        const t = waited.task;
        if (t.status === 'completed') {
          const result = t.result ?? { content: [] };
          const meta = isObject(result._meta) ? result._meta : {};
          return { ...result, _meta: { ...meta, ...related } };
        }
        if (t.status === 'failed') {
          const e = t.error ?? { code: JSONRPC.INTERNAL_ERROR, message: 'Task failed' };
          const toolResult = isObject(e.data) ? e.data[TOOL_ERROR_RESULT] : undefined;
          if (isObject(toolResult)) {
            const meta = isObject(toolResult._meta) ? toolResult._meta : {};
            return { ...toolResult, _meta: { ...meta, ...related } };
          }
          throw new McpProtocolError(e.code, e.message, e.data);
        }
        throw new McpProtocolError(TASK_CANCELLED_CODE, 'Task was cancelled', { taskId, status: t.status });
      }
    }
  }

  private async legacyList(p: Params, ctx: RequestContext): Promise<Record<string, unknown>> {
    const cursor = p.cursor;
    if (cursor !== undefined && typeof cursor !== 'string')
      throw ProtocolError.invalidParams('Invalid cursor');
    const page = await this.tasks.list(ctx.principal.id, cursor);
    return { tasks: page.tasks.map(legacyTask), ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}) };
  }

  // ---------------------------------------------------------------- extension era (2026-07-28)

  private declared(ctx: RequestContext): boolean {
    const ext = ctx.clientCapabilities.extensions;
    return isObject(ext) && TASKS_EXTENSION in ext;
  }

  private requireExtension(ctx: RequestContext): void {
    if (!this.declared(ctx)) throw ProtocolError.missingCapability(REQUIRED_EXTENSION);
  }

  private async modernToolsCall(p: Params, ctx: RequestContext): Promise<Record<string, unknown>> {
    const name = typeof p.name === 'string' ? p.name : '';
    const tool = this.mcp.getTool(name);
    // A legacy `task` param is unknown in this era: ignored, never an opt-in.
    if (!tool) return this.mcp.handle('tools/call', p, ctx);
    const decision = this.tasks.decide(
      { era: 'modern', taskSupport: tool.taskSupport, extensionDeclared: this.declared(ctx) },
      tool.name,
    );
    if (decision.mode === 'refuse')
      throw ProtocolError.missingCapability(REQUIRED_EXTENSION, decision.message);
    if (decision.mode === 'inline') return this.mcp.handle('tools/call', p, ctx);

    // Synchronous MRTR rounds may precede the task; the answers gathered so far travel with it.
    const { requestState: _r, ...stored } = p;
    const requestParams = { ...stored, inputResponses: ctx.answers ?? {} };
    this.quotas.checkBytes('task_params_bytes', requestParams);
    const escalation = await this.counted(() =>
      this.tasks.runInlineThenTask(
        {
          ownerId: ctx.principal.id,
          era: 'modern',
          toolName: tool.name,
          requestParams,
          requestedTtlMs: null,
        },
        (signal, link) =>
          this.executor.outcomeOf(() =>
            this.mcp.handle('tools/call', p, {
              ...ctx,
              signal,
              // Once escalated, the response carries the CreateTaskResult: progress goes to the task's
              // statusMessage, and notifications (progress, log) are no longer sent anywhere.
              notify: (method, params) => (link.escalated ? Promise.resolve() : ctx.notify(method, params)),
              reportTaskProgress: (u) => link.report(u),
            }),
          ),
        {
          signal: ctx.signal,
          windowMs: decision.mode === 'inline_then_task' ? decision.windowMs : undefined,
        },
      ),
    );
    switch (escalation.kind) {
      case 'aborted':
        throw ctx.signal.reason instanceof Error ? ctx.signal.reason : new Error('request closed');
      case 'task':
        return modernCreateTaskResult(escalation.task);
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

  /**
   * The work ended inside the window. An optional tool answers plainly; a required tool still answers with a
   * task (created already finished), since its callers expect one. A question ends the round (MRTR).
   */
  private async inlineOutcome(
    outcome: TaskOutcome,
    mustBeTask: boolean,
    requestParams: Params,
    toolName: string,
    ctx: RequestContext,
  ): Promise<Record<string, unknown>> {
    if (outcome.kind === 'input_required') throw new InputRequiredSignal(outcome.requests);
    if (!mustBeTask) {
      if (outcome.kind === 'completed') return outcome.result;
      throw new McpProtocolError(outcome.error.code, outcome.error.message, outcome.error.data);
    }
    const task = await this.counted(() =>
      this.tasks.create({
        ownerId: ctx.principal.id,
        era: 'modern',
        toolName,
        requestParams,
        requestedTtlMs: null,
        mode: 'escalated',
      }),
    );
    this.runner.adopt(task, new AbortController(), Promise.resolve(outcome));
    return modernCreateTaskResult(task);
  }

  private async modernUpdate(p: Params, ctx: RequestContext): Promise<Record<string, unknown>> {
    this.requireExtension(ctx);
    const taskId = taskIdOf(p);
    if (!isObject(p.inputResponses))
      throw ProtocolError.invalidParams('params.inputResponses must be an object');
    // Each update is bounded; TASK_MAX_INPUT_ROUNDS bounds how many a task stores.
    this.quotas.checkBytes('task_input_bytes', p.inputResponses);
    // The caller's principal is remembered only once the registry accepted it as the owner's, for the run
    // this update resumes: nothing is keyed by a client-chosen id before that.
    await this.tasks.submitInput(ctx.principal.id, taskId, p.inputResponses, (task) =>
      this.executor.rememberPrincipal(task.id, ctx.principal),
    );
    return {};
  }

  private async modernCancel(p: Params, ctx: RequestContext): Promise<Record<string, unknown>> {
    this.requireExtension(ctx);
    try {
      await this.tasks.cancel(ctx.principal.id, taskIdOf(p));
    } catch (err) {
      // Cancelling a finished task is acknowledged like any other: cancellation is cooperative.
      if (!(err instanceof TaskError && err.code === TaskErrorCode.TASK_TERMINAL)) throw err;
    }
    return {};
  }

  /** subscriptions/listen with notifications.taskIds: only the caller's own tasks, from any instance. */
  private async listenTasks(
    filter: unknown,
    ctx: { principal: Principal; clientCapabilities: Params; signal: AbortSignal },
    send: (method: string, params: Params) => void,
  ): Promise<unknown> {
    if (!Array.isArray(filter) || filter.some((id) => typeof id !== 'string')) {
      throw ProtocolError.invalidParams(
        'params.notifications.taskIds must be an array of strings',
        undefined,
        400,
      );
    }
    const ext = ctx.clientCapabilities.extensions;
    if (!(isObject(ext) && TASKS_EXTENSION in ext)) throw ProtocolError.missingCapability(REQUIRED_EXTENSION);
    const ownerId = ctx.principal.id;
    const ids = [...new Set(filter as string[])];
    // Listen before reading the baseline: a change committed in between is in the baseline or wakes it.
    // (No await until `subscription` exists, so no handler can run before it does.)
    const offChange = this.tasks.onTaskChanged((change) => {
      if (change.ownerId === ownerId) subscription.wake(change.taskId);
    });
    const offResync = this.tasks.onResync(() => subscription.wake());
    const baseline = this.tasks.versioned(ownerId, ids);
    const subscription = new TaskSubscription(
      (wanted) => this.tasks.versioned(ownerId, wanted),
      (task) => {
        const span = startTaskSpan('notifications/tasks', task, {
          'mcp.method.name': 'notifications/tasks',
          'mcp.task.status': task.status,
        });
        send('notifications/tasks', modernDetailedTask(task));
        span.end();
      },
      (err) =>
        this.logger.warn(
          `task subscription read failed: ${err instanceof Error ? err.message : String(err)}`,
        ),
      baseline,
    );
    const stop = (): void => {
      offChange();
      offResync();
      subscription.close();
    };
    ctx.signal.addEventListener('abort', stop, { once: true });
    let owned: Set<string>;
    try {
      owned = new Set((await baseline).map((r) => r.task.id));
    } catch (err) {
      stop();
      throw err;
    }
    return ids.filter((id) => owned.has(id));
  }
}
