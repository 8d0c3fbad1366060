import { ANONYMOUS_PRINCIPAL, type Principal } from '../principals/principal.js';
import type {
  ElicitParams,
  ElicitResult,
  InputRequestOptions,
  JsonObject,
  LoggingLevel,
  ProgressUpdate,
  RootsResult,
  SampleParams,
  SampleResult,
  ToolContext,
} from '../tool-dispatch/index.js';

/** One request a handler made through `ctx.input`, as the client would have seen it. */
export interface RecordedInput {
  method: 'elicitation/create' | 'sampling/createMessage' | 'roots/list';
  params: JsonObject;
  /** The handler's own `{ key }`, when it gave one. */
  key?: string;
}

/** One `ctx.log(...)` call. */
export interface RecordedLog {
  level: LoggingLevel;
  data: unknown;
  logger?: string;
  at: number;
}

/**
 * How a scripted client answers one kind of input request: a list consumed in order (one entry per request),
 * or a function of the request (and its key, if the handler named it). A request with no scripted answer fails
 * the handler's `await` with an Error, as a client without the capability would.
 */
export type ScriptedAnswer<P, R> = readonly R[] | ((params: P, key: string | undefined) => R | Promise<R>);

export interface ScriptedAnswers {
  elicit?: ScriptedAnswer<ElicitParams, ElicitResult>;
  sample?: ScriptedAnswer<SampleParams, SampleResult>;
  roots?: ScriptedAnswer<JsonObject, RootsResult>;
}

export interface RecordingToolContextOptions {
  principal?: Principal;
  /** Aborts the handler's `ctx.signal` too (the context also has its own `controller`). */
  signal?: AbortSignal;
  taskId?: string;
  clientCapabilities?: JsonObject;
  era?: 'legacy' | 'modern';
  /** Called at each `ctx.progress(...)`, as it happens (to cancel after some progress, say). */
  onProgress?: (update: ProgressUpdate) => void;
}

function answerer<P, R>(
  kind: string,
  script: ScriptedAnswer<P, R> | undefined,
): (params: P, key: string | undefined) => Promise<R> {
  let next = 0;
  return async (params, key) => {
    if (script === undefined) throw new Error(`test context: no ${kind} answer scripted`);
    if (typeof script === 'function') return script(params, key);
    const list = script;
    if (next >= list.length) {
      throw new Error(`test context: only ${list.length} ${kind} answer(s) scripted, the tool asked again`);
    }
    return list[next++];
  };
}

/**
 * A ToolContext for tests: records every progress update, log line and input request, and answers input
 * requests from a script. Everything else (the registry, the handler) is the real thing.
 */
export class RecordingToolContext implements ToolContext {
  readonly progressUpdates: ProgressUpdate[] = [];
  readonly logs: RecordedLog[] = [];
  readonly inputs: RecordedInput[] = [];
  /** Abort it to cancel the call, as a client cancellation or a task cancel would. */
  readonly controller = new AbortController();
  readonly signal: AbortSignal;
  readonly protocolVersion: string;
  readonly era: 'legacy' | 'modern';
  readonly principal: Principal;
  readonly taskId?: string;
  readonly clientCapabilities?: JsonObject;
  readonly input: ToolContext['input'];
  private readonly onProgress?: (update: ProgressUpdate) => void;

  constructor(answers: ScriptedAnswers = {}, options: RecordingToolContextOptions = {}) {
    this.principal = options.principal ?? ANONYMOUS_PRINCIPAL;
    this.era = options.era ?? 'legacy';
    this.protocolVersion = this.era === 'modern' ? '2026-07-28' : '2025-11-25';
    this.signal = options.signal
      ? AbortSignal.any([this.controller.signal, options.signal])
      : this.controller.signal;
    if (options.taskId !== undefined) this.taskId = options.taskId;
    if (options.onProgress) this.onProgress = options.onProgress;
    if (options.clientCapabilities !== undefined) this.clientCapabilities = options.clientCapabilities;
    const record = (method: RecordedInput['method'], params: JsonObject, opts?: InputRequestOptions) => {
      this.inputs.push({ method, params, ...(opts?.key !== undefined ? { key: opts.key } : {}) });
    };
    const elicit = answerer('elicitation', answers.elicit);
    const sample = answerer('sampling', answers.sample);
    const roots = answerer<JsonObject, RootsResult>('roots', answers.roots);
    this.input = {
      elicit: async (params, opts) => {
        record('elicitation/create', params, opts);
        return elicit(params, opts?.key);
      },
      sample: async (params, opts) => {
        record('sampling/createMessage', params, opts);
        return sample(params, opts?.key);
      },
      listRoots: async (opts) => {
        record('roots/list', {}, opts);
        return roots({}, opts?.key);
      },
    };
  }

  async progress(update: ProgressUpdate): Promise<void> {
    this.progressUpdates.push(update);
    this.onProgress?.(update);
  }

  async log(level: LoggingLevel, data: unknown, logger?: string): Promise<void> {
    this.logs.push({ level, data, ...(logger !== undefined ? { logger } : {}), at: Date.now() });
  }
}

/** A principal for tests: an authenticated user (`proxy` provider) unless overridden, so scopes are checked. */
export function testPrincipal(overrides: Partial<Principal> = {}): Principal {
  const subject = overrides.subject ?? 'test-user';
  return {
    id: `proxy:${subject}`,
    provider: 'proxy',
    subject,
    name: 'Test user',
    scopes: [],
    groups: [],
    ...overrides,
  };
}
