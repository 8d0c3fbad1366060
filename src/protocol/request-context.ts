import type { Principal } from '../principals/principal.js';
import type { McpSession } from '../sessions/session.entity.js';
import type { InputApi, JsonValue, LoggingLevel, ProgressUpdate } from '../tool-dispatch/tool-context.js';
import type { ResolvedTool } from '../tool-dispatch/tool-registry.service.js';
import type { JsonRpcId } from './json-rpc.js';

export type Era = 'legacy' | 'modern';

/** Everything a method handler knows about the request it serves, whatever the transport and era. */
export interface McpRequestContext {
  era: Era;
  protocolVersion: string;
  principal: Principal;
  /** Legacy era only. */
  session?: McpSession;
  clientCapabilities: Record<string, unknown>;
  requestId: JsonRpcId;
  method: string;
  signal: AbortSignal;
  progressToken?: string | number;
  /** Minimum level for notifications/message; null sends none. */
  logLevel: LoggingLevel | null;
  /** Sends a notification related to this request (on its response stream). */
  notify(method: string, params: Record<string, unknown>): Promise<void>;
  input: InputApi;
  /** Legacy era: drops the response connection while its stream lives on (see ToolContext). */
  closeSseStream?: () => Promise<void>;
  /**
   * Set when the call runs as a task (or may become one): every progress update is also handed here, so the
   * task's statusMessage follows it. Must not throw or wait.
   */
  reportTaskProgress?: (update: ProgressUpdate) => void;
  /**
   * tools/call: the tool named in params.name, looked up once (with the caller's access) by the era handler
   * at the start of the call; everything below uses it instead of looking the tool up again.
   */
  tool?: ResolvedTool;
  /**
   * Task runs, and modern calls that may become one: the run's attempt, the state the last run saved and
   * where `ctx.checkpoint` writes (ToolContext). Absent: attempt 1, no checkpoint, and a checkpoint is only
   * checked (the call can never become a task that would need it).
   */
  run?: RunState;
  /**
   * Task runs (and inline windows) of a tool with a retry policy: a handler error this returns a value for
   * is thrown as that value instead of becoming a tool error result (ToolRegistry.callTool `rethrow`).
   */
  rethrow?: (err: unknown) => Error | undefined;
  /** Modern era: answers gathered so far (MRTR), for the handler's input API. */
  answers?: Record<string, unknown>;
  /**
   * tools/call: the request's Idempotency-Key header, validated (protocol/idempotency-key.ts). Used only when
   * the call creates a task; every other call ignores it.
   */
  idempotencyKey?: string;
}

/** What a run knows of its task's durable state (McpRequestContext.run). */
export interface RunState {
  attempt: number;
  lastCheckpoint: JsonValue | undefined;
  checkpoint(state: unknown): Promise<void>;
}

export const LOG_LEVEL_ORDER: LoggingLevel[] = [
  'debug',
  'info',
  'notice',
  'warning',
  'error',
  'critical',
  'alert',
  'emergency',
];

export function isLoggingLevel(v: unknown): v is LoggingLevel {
  return typeof v === 'string' && (LOG_LEVEL_ORDER as string[]).includes(v);
}
