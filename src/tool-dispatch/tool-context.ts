import type { Principal } from '../principals/principal.js';
import type { JsonObject } from '../common/json.js';
import { JsonRpcError } from '../common/json-rpc-error.js';

/**
 * The contract between tool handlers and the server. Part of the public tool-author API
 * (re-exported from tool-dispatch/index.ts).
 */

export type TaskSupport = 'forbidden' | 'optional' | 'required';

/**
 * How a task's work is tried again after a run throws. The budget counts failed runs (errors and lost
 * workers); a hand-over at drain is not a failure and does not count.
 */
export interface RetryPolicy {
  /** Runs in all, the first included (1..100). */
  maxAttempts: number;
  /** Wait before the second run, in ms. */
  initialDelayMs: number;
  /** Each further wait is the previous one times this (>= 1). Default 2. */
  factor?: number;
  /** No wait is longer than this, in ms. Default 60000. */
  maxDelayMs?: number;
  /**
   * Which thrown errors start another run. Default: every error except a McpProtocolError (a deliberate
   * protocol answer) and the run's own cancellation.
   */
  retryOn?: (error: unknown) => boolean;
}

/**
 * A tool's opt-in to durable execution, declared next to `taskSupport`. Tools that declare nothing keep the
 * plain behaviour: one run, failed when its instance drains or dies.
 */
export interface ToolDurability {
  /**
   * The work can be run again from its last checkpoint (`ctx.checkpoint`): a run released at drain or lost
   * with its instance is queued for another worker instead of failed.
   */
  resumable?: boolean;
  retry?: RetryPolicy;
  /**
   * The longest a run is expected to take, in ms: a task created without a ttl is granted this plus
   * TASK_DEFAULT_TTL_MS (clamped by TASK_MAX_TTL_MS), so a default never expires it mid-run.
   */
  maxRunMs?: number;
}

/**
 * The fields of a tool's calls that the audit trail keeps (docs/tool-authoring.md, "Audit trail"). By
 * default a task's arguments and result are recorded only as their size and sha256; a field named here is
 * stored too, in the row's detail, after the same secret redaction as the logs. Top-level names only.
 */
export interface ToolAuditFields {
  /** Top-level argument fields (properties of the input schema) stored with `task.created`. */
  arguments?: string[];
  /** Top-level fields of the structured result (properties of the output schema) stored with `task.completed`. */
  result?: string[];
}

/** A JSON value as a checkpoint holds it (see `ToolContext.checkpoint`). */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export type LoggingLevel =
  'debug' | 'info' | 'notice' | 'warning' | 'error' | 'critical' | 'alert' | 'emergency';

export type { JsonObject };

/** Parameters of an `elicitation/create` request (form mode): a message and a flat JSON Schema object. */
export interface ElicitParams extends JsonObject {
  message: string;
  requestedSchema: JsonObject;
  mode?: 'form';
}

export interface ElicitResult extends JsonObject {
  action: 'accept' | 'decline' | 'cancel';
  content?: JsonObject;
}

/** Parameters of a `sampling/createMessage` request. */
export interface SampleParams extends JsonObject {
  messages: JsonObject[];
  maxTokens: number;
}

export interface SampleResult extends JsonObject {
  role: string;
  content: JsonObject | JsonObject[];
  model?: string;
}

export interface RootsResult extends JsonObject {
  roots: { uri: string; name?: string }[];
}

/**
 * Optional hints for one input request. `key` names the request where the wire needs a name for it (the
 * `inputRequests` map of an `input_required` result or task); keys must be unique within one handler run.
 * Without a key the server mints one from the call order, which is stable across re-runs.
 */
export interface InputRequestOptions {
  key?: string;
}

/**
 * One way to ask the client for something, whatever the protocol era: in the legacy era it becomes a
 * server-to-client request on the SSE stream; in the 2026-07-28 era an `input_required` round (MRTR), and for a
 * task an `input_required` task status answered through `tasks/update`. Handlers must be written so that
 * re-running them with the same answers reaches the same questions: in the modern era the handler is run
 * again from the start with every answer so far, and each `input` call returns its recorded answer.
 */
export interface InputApi {
  elicit(params: ElicitParams, options?: InputRequestOptions): Promise<ElicitResult>;
  sample(params: SampleParams, options?: InputRequestOptions): Promise<SampleResult>;
  listRoots(options?: InputRequestOptions): Promise<RootsResult>;
}

export interface ProgressUpdate {
  progress: number;
  total?: number;
  message?: string;
}

export interface ToolContext {
  readonly principal: Principal;
  /** Fires when the client cancels, the stream closes (modern era), the task is cancelled, or the server drains. */
  readonly signal: AbortSignal;
  readonly protocolVersion: string;
  readonly era: 'legacy' | 'modern';
  /** Set when the call runs as a task. */
  readonly taskId?: string;
  /**
   * What the client declared it can do (`initialize` capabilities, or the per-request
   * `_meta["io.modelcontextprotocol/clientCapabilities"]` in the 2026-07-28 era), when the edge knows it.
   * Lets a handler avoid asking for input the client cannot give.
   */
  readonly clientCapabilities?: JsonObject;
  /**
   * Legacy era over Streamable HTTP only: closes this request's SSE connection without ending its stream.
   * The client reconnects with Last-Event-ID and receives what follows (SSE polling, SEP-1699).
   */
  readonly closeSseStream?: () => Promise<void>;
  /** Sends `notifications/progress` when the client asked for progress; a no-op otherwise. */
  progress(update: ProgressUpdate): Promise<void>;
  /** Sends `notifications/message` at or above the client's chosen level. */
  log(level: LoggingLevel, data: unknown, logger?: string): Promise<void>;
  readonly input: InputApi;
  /**
   * The run this is: 1 inline and on a task's first run; each retry, hand-over at drain or rescue after a
   * crash runs the task again as the next attempt (tool-authoring.md, "Work that survives restarts").
   */
  readonly attempt: number;
  /** The state the task's last run saved with `checkpoint`; undefined when none was saved (or it was null). */
  readonly lastCheckpoint: JsonValue | undefined;
  /**
   * Saves progress state (JSON, at most QUOTA_TASK_CHECKPOINT_BYTES): the next run of the task, after a retry,
   * a hand-over or a rescue, starts with it as `lastCheckpoint`. Written under the run's fence, so a run that
   * lost its task never overwrites a newer one. Inline (no task yet) it is kept in memory and written if the
   * call becomes a task. Throws a CheckpointError when the state is not JSON, is too large, or the run no
   * longer holds its task (the task is not changed then).
   */
  checkpoint(state: unknown): Promise<void>;
}

/**
 * Thrown by a handler (or the server) to answer with a JSON-RPC error instead of a tool error result.
 * A plain Error thrown by a tool becomes `{ isError: true }` with its message; this one becomes
 * `{ error: { code, message, data } }` (and a task ends `failed`).
 */
export class McpProtocolError extends JsonRpcError {
  constructor(code: number, message: string, data?: unknown) {
    super(code, message, data);
  }
}

/**
 * Base class of control-flow signals raised inside handlers by the server itself (for example "input is
 * required, end this round"). Dispatch never turns them into tool error results; they propagate to the caller.
 */
export abstract class McpControlSignal extends Error {}
