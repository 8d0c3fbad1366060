import { ANONYMOUS_PRINCIPAL, type Principal } from '../principals/principal.js';
import { serialiseCheckpoint } from '../tool-dispatch/checkpoint.js';
import type {
  ElicitParams,
  ElicitResult,
  InputRequestOptions,
  JsonObject,
  JsonValue,
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
  /** Pretend this is the task's attempt N (`ctx.attempt`, default 1), */
  attempt?: number;
  /** resumed from this checkpoint (`ctx.lastCheckpoint`). */
  lastCheckpoint?: JsonValue;
  /** The checkpoint cap the server would apply (QUOTA_TASK_CHECKPOINT_BYTES; default its default, 65536). */
  checkpointBytes?: number;
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
  readonly attempt: number;
  readonly lastCheckpoint: JsonValue | undefined;
  /** Every state the handler saved with `ctx.checkpoint`, in order, as the server would store it. */
  readonly checkpoints: JsonValue[] = [];
  private readonly onProgress?: (update: ProgressUpdate) => void;
  private readonly checkpointBytes: number;

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
    this.attempt = options.attempt ?? 1;
    this.lastCheckpoint = options.lastCheckpoint;
    this.checkpointBytes = options.checkpointBytes ?? 65536;
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

  /** Checked as the server checks it (JSON, size), then recorded in `checkpoints`. */
  async checkpoint(state: unknown): Promise<void> {
    this.checkpoints.push(JSON.parse(serialiseCheckpoint(state, this.checkpointBytes)) as JsonValue);
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
