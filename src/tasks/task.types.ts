import type { StoredTraceContext } from '../telemetry/trace-context.js';
import type { TaskStatus } from './task-state.js';
import type { JsonValue, ProgressUpdate } from '../tool-dispatch/tool-context.js';

/** The era that created a task; a task keeps its era's vocabulary for life. */
export type TaskEra = 'legacy' | 'modern';

/** A JSON-RPC error object, as a failed task records it and tasks/result (legacy) replays it. */
export interface TaskErrorPayload {
  code: number;
  message: string;
  data?: unknown;
}

/** One outstanding request to the client (elicitation/create, sampling/createMessage, roots/list). */
export interface InputRequest {
  method: string;
  params?: Record<string, unknown>;
}

/**
 * A task as the registry hands it out: a plain immutable value, never a live entity. The protocol layer
 * renders it for its era (ttl/pollInterval versus ttlMs/pollIntervalMs, wrapped or flat).
 */
export interface TaskSnapshot {
  readonly id: string;
  readonly ownerId: string;
  /** Set for legacy tasks: the session that created them (for notifications/tasks/status). */
  readonly sessionId: string | null;
  readonly era: TaskEra;
  readonly toolName: string;
  readonly status: TaskStatus;
  readonly statusMessage: string | null;
  readonly createdAt: Date;
  readonly lastUpdatedAt: Date;
  /** Granted retention from creation, in ms (the client's request clamped to TASK_MAX_TTL_MS). */
  readonly ttlMs: number;
  readonly expiresAt: Date;
  readonly pollIntervalMs: number;
  /** The original tools/call params. */
  readonly requestParams: Record<string, unknown>;
  /** The tool's result (a CallToolResult, `isError` included) when completed. */
  readonly result: Record<string, unknown> | null;
  /** The JSON-RPC error when failed (also set for expiry, lost workers and shutdown). */
  readonly error: TaskErrorPayload | null;
  /** Outstanding input requests by server-minted key (empty unless input_required after a park). */
  readonly inputRequests: Readonly<Record<string, InputRequest>>;
  /** Every answer received so far, by key, over the task's whole life. */
  readonly inputResponses: Readonly<Record<string, unknown>>;
  /** What the handler saved when it parked; handed back when it resumes. */
  readonly handlerState: unknown;
  /** How many input rounds the task went through. */
  readonly inputRounds: number;
  /** Fencing token: bumped whenever the task changes hands (resume, cancel, expiry, rescue). */
  readonly generation: number;
  /** The instance whose worker runs the task now, if any. */
  readonly instanceId: string | null;
  readonly leaseExpiresAt: Date | null;
  /** The trace context of the span that created the task, or null when it was not traced. */
  readonly traceContext: StoredTraceContext | null;
  /** The run the task is on (1 for the first; each retry, hand-over or rescue starts the next). */
  readonly attempt: number;
  /** Runs that failed (errors, lost workers): the retry budget's measure. Hand-overs do not count. */
  readonly failedAttempts: number;
  /** The tool's retry budget, fixed at creation (1: no retries). */
  readonly maxAttempts: number;
  /** The tool declared its work resumable: a lost or drained run is re-queued, not failed. */
  readonly resumable: boolean;
  /** Set while queued (working, no instance): when a worker may claim it. */
  readonly availableAt: Date | null;
  /** The task `tasks retry` created this one from, if any. */
  readonly redrivenFrom: string | null;
}

/** What a run starts with beyond its snapshot (a claim brings both from the task's row). */
export interface RunStart {
  /** The last progress state a run saved (null or absent: none). */
  checkpoint?: unknown;
  /** The owner's principal as stored at creation. */
  principal?: Readonly<Record<string, unknown>> | null;
}

/** What the executor reports when a run of the work ends. */
export type TaskOutcome =
  | { kind: 'completed'; result: Record<string, unknown> }
  | { kind: 'failed'; error: TaskErrorPayload }
  | {
      kind: 'input_required';
      /**
       * The questions of this round by the handler's own local key (unique within the round). The store
       * mints the wire key `inputKeyFor(round, localKey)`, unique over the task's life.
       */
      requests: Record<string, InputRequest>;
      /** Saved as is (JSON) and handed back on resume; at most TASK_MAX_HANDLER_STATE_BYTES. */
      handlerState?: unknown;
    };

export interface TaskExecutionContext {
  /** Aborted on cancel (from any instance), expiry, lost ownership and server shutdown. */
  readonly signal: AbortSignal;
  /** Every answer so far by wire key (empty on the first run). */
  readonly answers: Readonly<Record<string, unknown>>;
  /** What the handler saved when it last parked (undefined on the first run). */
  readonly handlerState: unknown;
  /** Rounds completed so far: the next park is round `inputRound + 1`. */
  readonly inputRound: number;
  /**
   * The owner's principal as the creating request saw it (stored with the task), for a run whose creating
   * request was not on this instance (claimed from the queue); null when not known to the runner.
   */
  readonly storedPrincipal: Readonly<Record<string, unknown>> | null;
  /**
   * Legacy era, input over SSE: the worker stays alive and flips the visible status to input_required
   * while it waits, then back to working. Fenced like every worker write; returns false when the write was
   * dropped (the task is no longer this worker's).
   */
  setStatus(status: 'working' | 'input_required', statusMessage?: string | null): Promise<boolean>;
  /**
   * The tool reported progress: its message becomes the task's statusMessage (rate-limited by
   * TASK_PROGRESS_WRITE_MS, published to subscribers). Never throws and never waits.
   */
  reportProgress(update: ProgressUpdate): void;
  /** The task's run number (TaskSnapshot.attempt): 1 on the first run, +1 per retry, hand-over or rescue. */
  readonly attempt: number;
  /** The checkpoint the task's last run saved (undefined when none). */
  readonly checkpoint: JsonValue | undefined;
  /**
   * Saves this run's checkpoint, fenced (TaskWorkerRepository.saveCheckpoint). Writes keep their order;
   * rejects with a CheckpointError when the state is refused or the run no longer holds the task.
   */
  saveCheckpoint(state: unknown): Promise<void>;
}

/** Published (ids and status only) on every creation and status change, from whichever instance made it. */
export interface TaskChange {
  taskId: string;
  ownerId: string;
  sessionId: string | null;
  era: TaskEra;
  status: TaskStatus;
  previousStatus: TaskStatus | null;
  generation: number;
}

/**
 * The wire key of a round's input request. Deterministic, so a handler that re-runs from the top can find
 * its answers (`answers[inputKeyFor(round, localKey)]`), and unique over the task's life because rounds only
 * grow and local keys are unique within a round.
 */
export function inputKeyFor(round: number, localKey: string): string {
  return `r${round}.${localKey}`;
}

export const LOCAL_INPUT_KEY = /^[A-Za-z0-9_-]{1,64}$/;

/** A task as read with its row version (the number of changes it has seen), for change subscriptions. */
export interface VersionedTask {
  task: TaskSnapshot;
  version: number;
}
