import { Injectable, Logger } from '@nestjs/common';
import { JsonRpcError } from '../../common/json-rpc-error.js';
import { isJsonObject } from '../../common/json.js';
import { errorMessage } from '../../common/error-message.js';
import { progressTokenOf } from '../../common/progress-token.js';
import { JSONRPC } from '../../protocol/json-rpc.js';
import { McpMethodsService } from '../../protocol/mcp-methods.service.js';
import { InputRequiredSignal, MrtrInput } from '../../protocol/mrtr-input.js';
import type { McpRequestContext } from '../../protocol/request-context.js';
import { META } from '../../protocol/versions.js';
import { principalFromStored, type Principal } from '../../principals/principal.js';
import { ToolRegistry, type ResolvedTool } from '../../tool-dispatch/tool-registry.service.js';
import { retryRethrow } from './tool-retry-policy.js';
import { QuotaService } from '../../quotas/quota.service.js';
import { SessionsService } from '../../sessions/sessions.service.js';
import type { TaskExecutionContext, TaskOutcome, TaskSnapshot } from '../task.types.js';
import { TaskWork } from '../execution/task-work.port.js';
import {
  type ElicitParams,
  type ElicitResult,
  type InputApi,
  type RootsResult,
  type SampleParams,
  type SampleResult,
} from '../../tool-dispatch/tool-context.js';
import { SessionStream } from '../../protocol/session-stream.port.js';
import type { Params } from './task-params.js';

/** Wire keys are `r<round>.<local key>`; the handler knows only its local keys. */
function localAnswers(wire: Readonly<Record<string, unknown>>): Record<string, unknown> {
  // fromEntries defines own properties: a key `__proto__` stays a key instead of replacing the prototype.
  return Object.fromEntries(
    Object.entries(wire).map(([k, v]) => {
      const dot = k.indexOf('.');
      return [dot > 0 && /^r\d+$/.test(k.slice(0, dot)) ? k.slice(dot + 1) : k, v];
    }),
  );
}

/**
 * Runs a task's tool call in the background, for both eras. The tool sees the same ToolContext as inline:
 * in the modern era (2026-07-28) its questions park the task as input_required (answered with tasks/update,
 * then the handler runs again from the top with every answer); in the legacy era (2025-11-25) they go to the
 * client as server-to-client requests on the session's stream, tagged with the related task.
 */
@Injectable()
export class TaskToolRunner extends TaskWork {
  private readonly logger = new Logger(TaskToolRunner.name);
  /**
   * Who starts or resumes each task on this instance (the tool context carries a principal, not an id).
   * Filled only after the registry accepted the caller as the owner, just before the run starts, and
   * taken back as the run begins: it never holds more entries than runs starting at this moment.
   */
  private readonly principals = new Map<string, Principal>();
  /** The session a legacy-era run was created in, as the creating request saw it (saves a read). */
  private readonly sessionViews = new Map<string, SessionView>();
  /** The tool the creating request resolved (a legacy task's first run does not look it up again). */
  private readonly tools = new Map<string, ResolvedTool>();

  constructor(
    private readonly mcp: McpMethodsService,
    private readonly stream: SessionStream,
    private readonly sessions: SessionsService,
    private readonly quotas: QuotaService,
    private readonly registry: ToolRegistry,
  ) {
    super();
  }

  /** Call only with the owner's principal, after the registry checked ownership (creation or resume). */
  rememberPrincipal(taskId: string, principal: Principal, session?: SessionView, tool?: ResolvedTool): void {
    this.principals.set(taskId, principal);
    if (session) this.sessionViews.set(taskId, session);
    if (tool) this.tools.set(taskId, tool);
  }

  /** Principals remembered for runs that have not begun yet (0 when idle). */
  get pendingPrincipals(): number {
    return this.principals.size;
  }

  async execute(task: TaskSnapshot, ctx: TaskExecutionContext): Promise<TaskOutcome> {
    const principal = this.principals.get(task.id);
    const session = this.sessionViews.get(task.id);
    const tool = this.tools.get(task.id);
    this.principals.delete(task.id);
    this.sessionViews.delete(task.id);
    this.tools.delete(task.id);
    // Without one (a run claimed from the queue, rescued or resumed elsewhere), the principal stored at
    // creation; for a task created before principals were stored, the owner's id stands in.
    const stored = principalFromStored(ctx.storedPrincipal);
    // A stored principal always names the owner (a guard: the row is the owner's, not a case that occurs).
    const caller = principal ?? (stored?.id === task.ownerId ? stored : fallbackPrincipal(task.ownerId));
    return this.run(task, ctx, caller, session, tool);
  }

  /** Runs the tool once under a request context of the task's era; maps how it ended to a TaskOutcome. */
  async outcomeOf(work: () => Promise<Record<string, unknown>>): Promise<TaskOutcome> {
    try {
      const result = await work();
      // A result too large to store ends the task failed, with an error naming the quota.
      if (!this.quotas.resultFits(result)) {
        const limit = this.quotas.resultLimit;
        return {
          kind: 'failed',
          error: {
            code: JSONRPC.SERVER_ERROR,
            message: `The result exceeds QUOTA_TASK_RESULT_BYTES = ${limit}`,
            data: { quota: 'task_result_bytes', limit, setting: 'QUOTA_TASK_RESULT_BYTES' },
          },
        };
      }
      return { kind: 'completed', result };
    } catch (err) {
      if (err instanceof InputRequiredSignal) return { kind: 'input_required', requests: err.requests };
      if (err instanceof JsonRpcError) {
        return {
          kind: 'failed',
          error: {
            code: err.code,
            message: err.message,
            ...(err.data === undefined ? {} : { data: err.data }),
          },
        };
      }
      throw err;
    }
  }

  private async run(
    task: TaskSnapshot,
    ctx: TaskExecutionContext,
    principal: Principal,
    knownSession?: SessionView,
    tool?: ResolvedTool,
  ): Promise<TaskOutcome> {
    const params = task.requestParams;
    const meta = isJsonObject(params._meta) ? params._meta : {};
    let input: InputApi;
    let clientCapabilities: Params;
    let protocolVersion: string;
    let notify: McpRequestContext['notify'] = async () => undefined;
    const progressToken = progressTokenOf(meta);

    if (task.era === 'modern') {
      const caps = meta[META.CLIENT_CAPABILITIES];
      const version = meta[META.PROTOCOL_VERSION];
      clientCapabilities = isJsonObject(caps) ? caps : {};
      protocolVersion = typeof version === 'string' ? version : '2026-07-28';
      const synchronous = isJsonObject(params.inputResponses) ? params.inputResponses : {};
      input = new MrtrInput({ ...synchronous, ...localAnswers(ctx.answers) }, clientCapabilities);
    } else {
      // A session's capabilities and version are fixed at initialize: the creating request's view is as
      // good as a read. A resumed or rescued run reads them (a session deleted since reads as none).
      const session = knownSession ?? (task.sessionId ? await this.sessions.find(task.sessionId) : null);
      clientCapabilities = session?.clientCapabilities ?? {};
      protocolVersion = session?.protocolVersion ?? '2025-11-25';
      input = new LegacyTaskInput(task, ctx, this.stream, clientCapabilities);
      if (task.sessionId) {
        const sessionId = task.sessionId;
        // A notification that cannot be delivered (the database is down) is lost, never the tool's error.
        notify = async (method, p) => {
          try {
            await this.stream.publish(sessionId, {
              jsonrpc: '2.0',
              method,
              params: { ...p, _meta: { [META.RELATED_TASK]: { taskId: task.id } } },
            });
          } catch (err) {
            this.logger.warn(`task ${task.id}: ${method} not delivered: ${errorMessage(err)}`);
          }
        };
      }
    }

    const rctx: McpRequestContext = {
      era: task.era,
      protocolVersion,
      principal,
      clientCapabilities,
      requestId: task.id,
      method: 'tools/call',
      signal: ctx.signal,
      // Progress and log notifications are not part of the modern era's tasks; the legacy era keeps the
      // progress token valid for the task's life and sends them on the session's stream.
      progressToken: task.era === 'legacy' ? progressToken : undefined,
      logLevel: null,
      notify,
      // Both eras: the latest progress becomes the task's statusMessage (rate-limited by the runner).
      reportTaskProgress: (u) => ctx.reportProgress(u),
      input,
      tool,
      run: {
        attempt: ctx.attempt,
        lastCheckpoint: ctx.checkpoint,
        checkpoint: (state) => ctx.saveCheckpoint(state),
      },
      rethrow: retryRethrow(tool?.descriptor ?? this.registry.getTool(task.toolName)),
    };
    const { inputResponses: _i, requestState: _r, ...callParams } = params;
    const outcome = await this.outcomeOf(() => this.mcp.callTool(callParams, rctx));
    return task.era === 'legacy' ? legacyToolErrorAsFailure(outcome) : outcome;
  }
}

/** What a legacy-era run needs of its session (both fixed when the session was initialized). */
export interface SessionView {
  clientCapabilities: Params;
  protocolVersion: string;
}

/** Marks a failed legacy task whose failure is a tool error result (tasks/result replays that result). */
export const TOOL_ERROR_RESULT = 'toolErrorResult';

/**
 * 2025-11-25: a tool error result (`isError`) ends the task failed; tasks/result still returns exactly what
 * the call returned, so the result rides along in the error's data. (The modern era keeps it completed.)
 */
function legacyToolErrorAsFailure(outcome: TaskOutcome): TaskOutcome {
  if (outcome.kind !== 'completed' || outcome.result.isError !== true) return outcome;
  const content = Array.isArray(outcome.result.content)
    ? (outcome.result.content as { text?: unknown }[])
    : [];
  const text = content.find((c) => typeof c.text === 'string')?.text;
  return {
    kind: 'failed',
    error: {
      code: -32603,
      message: typeof text === 'string' ? text : 'The tool reported an error',
      data: { [TOOL_ERROR_RESULT]: outcome.result },
    },
  };
}

function fallbackPrincipal(ownerId: string): Principal {
  const prefix = ownerId.split(':')[0];
  const provider = prefix === 'oidc' || prefix === 'proxy' || prefix === 'apikey' ? prefix : 'anonymous';
  return { id: ownerId, provider, subject: ownerId, scopes: [], groups: [] };
}

/**
 * Legacy-era input for a task: a server-to-client request on the session's own stream carrying the
 * related-task `_meta`, with the task shown as input_required while the client is asked.
 */
class LegacyTaskInput implements InputApi {
  constructor(
    private readonly task: TaskSnapshot,
    private readonly ctx: TaskExecutionContext,
    private readonly stream: SessionStream,
    private readonly caps: Params,
  ) {}

  async elicit(params: ElicitParams): Promise<ElicitResult> {
    return (await this.ask('elicitation/create', 'elicitation', { mode: 'form', ...params })) as ElicitResult;
  }

  async sample(params: SampleParams): Promise<SampleResult> {
    return (await this.ask('sampling/createMessage', 'sampling', params)) as SampleResult;
  }

  async listRoots(): Promise<RootsResult> {
    return (await this.ask('roots/list', 'roots', {})) as RootsResult;
  }

  private async ask(method: string, capability: string, params: Params): Promise<Params> {
    if (!Object.hasOwn(this.caps, capability)) {
      throw new Error(`The client did not declare the ${capability} capability, so ${method} cannot be sent`);
    }
    if (!this.task.sessionId) throw new Error('This task has no session to ask the client through');
    await this.ctx.setStatus('input_required', `Waiting for the client to answer ${method}`);
    try {
      return await this.stream.request(
        this.task.sessionId,
        method,
        { ...params, _meta: { [META.RELATED_TASK]: { taskId: this.task.id } } },
        this.ctx.signal,
      );
    } finally {
      await this.ctx.setStatus('working', null);
    }
  }
}
