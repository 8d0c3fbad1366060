import { errorMessage } from '../../common/error-message.js';
import { Injectable, Logger } from '@nestjs/common';
import { SpanStatusCode, type Span } from '@opentelemetry/api';
import { correlationId, internalErrorText, isInfrastructureFault } from '../../common/internal-fault.js';
import { unstorableText, UnstorableValueError } from '../../common/storable-text.js';
import { FinishedTaskCache } from '../registry/finished-task-cache.js';
import { TasksConfig } from '../tasks.config.js';
import { TaskMetrics } from '../task-metrics.service.js';
import { TaskOutcomesRepository } from '../store/task-outcomes.repository.js';
import { sleep, type RunningTask } from './running-task.js';
import { isTerminal } from '../task-state.js';
import {
  TaskWorkerRepository,
  type ParkResult,
  type WorkerWriteResult,
} from '../store/task-worker.repository.js';
import type { TaskErrorPayload, TaskOutcome, TaskSnapshot } from '../task.types.js';
import { TaskError, TaskErrorCode } from '../tasks.errors.js';
import { UnresolvedWriteError } from '../store/unresolved-write.js';
import { attemptsExhausted } from '../task-failures.js';
import { backoffMs, retryStatusMessage, RetryableFailure } from './task-retry.js';

/** Backoff of a fenced final write that failed (lock_timeout, reset connection, failover). */
const WRITE_RETRY_BASE_MS = 100;
const WRITE_RETRY_CAP_MS = 2000;

export type WriteOp = 'complete' | 'fail' | 'park' | 'requeue';

/** A final write that no attempt can land: PostgreSQL refuses its data (see unstorableReason). */
interface Unstorable {
  unstorable: string;
}

/**
 * Why a write can never land, or null when another attempt may: a value known to be unstorable, or one
 * PostgreSQL refused as data (SQLSTATE class 22, data exception) or as over one of its limits (class 54).
 * Only the SQLSTATE is told: the server's text may name tables and types.
 */
function unstorableReason(err: unknown): string | null {
  if (err instanceof UnstorableValueError) return err.message;
  if (!isInfrastructureFault(err)) return null;
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string') return null;
  if (code.startsWith('22')) return `PostgreSQL refused it as invalid data (SQLSTATE ${code})`;
  if (code.startsWith('54')) return `it is over one of PostgreSQL's limits (SQLSTATE ${code})`;
  return null;
}

/** What a final write stores of an outcome: its name, the root of paths into it, and the value. */
function storedPart(outcome: TaskOutcome): [what: string, root: string, value: unknown] {
  switch (outcome.kind) {
    case 'completed':
      return ['result', 'result', outcome.result];
    case 'failed':
      return ['error', 'error', outcome.error];
    case 'input_required':
      return ['input request', 'input', { requests: outcome.requests, handlerState: outcome.handlerState }];
  }
}

function errorPayload(err: unknown, correlation: string): TaskErrorPayload {
  // McpProtocolError (tool-dispatch) and anything shaped like it carry a JSON-RPC code of their own.
  const e = err as { code?: unknown; message?: unknown; data?: unknown };
  if (
    e &&
    !isInfrastructureFault(err) &&
    typeof e.code === 'number' &&
    Number.isInteger(e.code) &&
    typeof e.message === 'string'
  ) {
    return e.data === undefined
      ? { code: e.code, message: e.message }
      : { code: e.code, message: e.message, data: e.data };
  }
  // Anything else is a fault of ours: its text stays in the log, the client gets the id to quote.
  return { code: -32603, message: internalErrorText(correlation) };
}

/**
 * Records what a run of the task runner came to: the outcome it settled with (a throw, an abort, a value),
 * written fenced and retried through database faults, its metrics and its span. A run that shutdown took
 * over, or that lost its task, records nothing.
 */
@Injectable()
export class TaskOutcomeRecorder {
  private readonly logger = new Logger(TaskOutcomeRecorder.name);

  constructor(
    private readonly repo: TaskWorkerRepository,
    private readonly outcomes: TaskOutcomesRepository,
    private readonly config: TasksConfig,
    private readonly metrics: TaskMetrics,
    private readonly finished: FinishedTaskCache,
  ) {}

  async record(
    entry: RunningTask,
    settled: { ok: true; outcome: TaskOutcome } | { ok: false; error: unknown },
  ): Promise<void> {
    entry.settled = true; // set by the runner already; a direct caller gets the same
    // Whether the run failed on its own, before anything aborted it (a hand-over aborts it once written).
    const failedUnaborted = !settled.ok && !entry.controller.signal.aborted;
    await entry.progress.stop();
    // The run's checkpoints land before its outcome: a re-queue first would fence them out.
    await entry.checkpoints.settled();
    // A hand-over already on its way to the database decides first: if it lands, the run's fence has moved.
    await entry.handover;
    if (entry.handedOver) {
      entry.span.addEvent('task.handed_over');
      // A retryable failure that raced the hand-over still counts and waits its backoff.
      if (failedUnaborted && settled.error instanceof RetryableFailure) {
        await this.chargeHandedOver(entry, settled.error);
      }
      return;
    }
    if (entry.shutdown) {
      entry.span.addEvent('task.shutdown', { 'mcp.task.status': 'failed' });
      return;
    }
    if (entry.lost) {
      entry.span.addEvent('task.lost');
      return;
    }
    let outcome: TaskOutcome;
    /** Set when this failure spends the last attempt of a retry policy (counted once it is written). */
    let exhausted = false;
    if (!settled.ok && settled.error instanceof RetryableFailure && failedUnaborted) {
      const failure = settled.error;
      const failures = entry.failedAttempts + 1;
      if (failures < entry.maxAttempts) {
        await this.requeueForRetry(entry, failure, failures);
        return;
      }
      exhausted = true;
      outcome = { kind: 'failed', error: attemptsExhausted(failures, failure.lastError.message) };
    } else if (settled.ok) {
      outcome = settled.outcome;
    } else if (entry.controller.signal.aborted) {
      // A worker that throws after being aborted is acknowledging the abort. Usually the task is no longer
      // this run's (cancelled, expired, superseded) and the fenced write below is dropped; if it still is
      // (an abort with no change behind it), the task fails now instead of waiting for its lease to lapse.
      const reason: unknown = entry.controller.signal.reason;
      entry.span.addEvent('task.aborted');
      outcome = {
        kind: 'failed',
        error: { code: -32603, message: `Task aborted: ${errorMessage(reason)}` },
      };
    } else {
      const id = correlationId();
      this.logger.error(
        `task ${entry.fence.taskId} (${entry.toolName}) threw [${id}]: ${errorMessage(settled.error)}`,
        settled.error instanceof Error ? settled.error.stack : undefined,
      );
      outcome = { kind: 'failed', error: errorPayload(settled.error, id) };
    }
    const aborted = entry.controller.signal.aborted && !settled.ok;
    let written = await this.writeOutcome(entry, outcome);
    if (written !== null && 'unstorable' in written) {
      // No retry can store it: the task fails now, saying why, instead of after TASK_WRITE_RETRY_MS of
      // retries and the janitor's "worker lost".
      const [what, root, stored] = storedPart(outcome);
      const message = `The tool's ${what} could not be stored: ${unstorableText(stored, root) ?? written.unstorable}`;
      outcome = { kind: 'failed', error: { code: -32603, message } };
      written = await this.writeOutcome(entry, outcome);
    }
    const result = written !== null && 'unstorable' in written ? null : written;
    if (result?.applied && isTerminal(result.task.status)) {
      this.metrics.taskFinished(entry, result.task.status === 'completed' ? 'completed' : 'failed');
      if (exhausted) this.metrics.taskRetried(entry.toolName, 'exhausted');
    }
    if (result?.applied) {
      const expiry = 'expiry' in result ? result.expiry : undefined;
      entry.written = { task: result.task, expiry };
      // A terminal state this instance committed is what the database holds until the janitor deletes the
      // row after its ttl: the owner's reads from now on are answered from it, not read back. Most reads of
      // a task come after its outcome committed (a client polls once the handle answered), so this saves
      // the first read of nearly every task run here.
      if (expiry && isTerminal(result.task.status)) {
        this.finished.put(result.task, expiry.measuredAt, expiry.msUntilExpiry);
      }
    }
    if (result) traceOutcome(entry.span, outcome, result);
    else
      entry.span.setStatus({ code: SpanStatusCode.ERROR, message: `the ${outcome.kind} write never landed` });
    if (result && !result.applied) {
      if (result.reason === 'expired') this.metrics.taskFinished(entry, 'expired');
      // An aborted run losing its task is the expected end of a cancel, not a stale write.
      else if (!aborted) this.metrics.staleWrite(entry.toolName);
      this.logger.debug?.(
        `dropped a late ${outcome.kind} write for task ${entry.fence.taskId} (${result.reason})`,
      );
    }
  }

  /**
   * The run failed with an error its tool's policy retries and attempts are left: the task goes back to the
   * queue for attempt N+1 once the backoff has passed (TaskWorkerRepository.requeue, fenced), its
   * statusMessage naming the failed attempt, the error and when the next one runs. Any instance's claimer
   * runs it then; a cancel meanwhile ends it at once (a queued task has no worker to wait for).
   */
  private async requeueForRetry(
    entry: RunningTask,
    failure: RetryableFailure,
    failures: number,
  ): Promise<void> {
    const retry = retryWrite(entry, failure, failures);
    const delayMs = retry.delayMs;
    const r = await this.writeWithRetry(entry, 'requeue', () => this.repo.requeue(entry.fence, retry));
    if (r === null || 'unstorable' in r) {
      entry.span.setStatus({ code: SpanStatusCode.ERROR, message: 'the retry could not be scheduled' });
      return;
    }
    if (!r.applied) {
      if (r.reason === 'expired') this.metrics.taskFinished(entry, 'expired');
      else this.metrics.staleWrite(entry.toolName);
      entry.span.addEvent('task.stale_write_dropped', { 'mcp.task.outcome': 'requeue' });
      return;
    }
    this.metrics.taskRetried(entry.toolName, 'scheduled');
    entry.written = { task: r.task };
    entry.span.addEvent('task.retry_scheduled', {
      'mcp.task.attempt': entry.attempt,
      'mcp.task.retry_delay_ms': delayMs,
    });
    entry.span.setStatus({ code: SpanStatusCode.ERROR, message: failure.lastError.message });
  }

  /**
   * The run failed with a retryable error while its hand-over was written, and the hand-over landed first:
   * the queued attempt it made is charged the failure instead (TaskWorkerRepository.chargeHandedOver).
   */
  private async chargeHandedOver(entry: RunningTask, failure: RetryableFailure): Promise<void> {
    const retry = retryWrite(entry, failure, entry.failedAttempts + 1);
    const delayMs = retry.delayMs;
    const r = await this.writeWithRetry(entry, 'requeue', () =>
      this.repo.chargeHandedOver(entry.fence, retry),
    );
    if (r === null || 'unstorable' in r || !r.applied) {
      entry.span.addEvent('task.stale_write_dropped', { 'mcp.task.outcome': 'requeue' });
      return;
    }
    this.metrics.taskRetried(entry.toolName, 'scheduled');
    entry.span.addEvent('task.retry_scheduled', {
      'mcp.task.attempt': entry.attempt,
      'mcp.task.retry_delay_ms': delayMs,
    });
  }

  /** The final write of `outcome`, retried (see writeWithRetry). */
  private writeOutcome(
    entry: RunningTask,
    outcome: TaskOutcome,
  ): Promise<WorkerWriteResult | ParkResult | Unstorable | null> {
    switch (outcome.kind) {
      case 'completed': {
        const r = outcome.result;
        return this.writeWithRetry(entry, 'complete', () => this.outcomes.completeIfCurrent(entry.fence, r));
      }
      case 'failed': {
        const e = outcome.error;
        return this.writeWithRetry(entry, 'fail', () => this.outcomes.failIfCurrent(entry.fence, e));
      }
      case 'input_required': {
        const { requests, handlerState } = outcome;
        return this.writeWithRetry(entry, 'park', () =>
          this.repo.parkForInput(entry.fence, requests, handlerState, {
            maxRounds: this.config.TASK_MAX_INPUT_ROUNDS,
            maxKeys: this.config.TASK_MAX_INPUT_KEYS,
            maxStateBytes: this.config.TASK_MAX_HANDLER_STATE_BYTES,
          }),
        );
      }
    }
  }

  /**
   * A fenced final write, retried with jittered exponential backoff while it fails for a reason the next
   * attempt may not have (lock_timeout behind another transaction, a reset connection, a database restart or
   * failover), for up to TASK_WRITE_RETRY_MS. The retries outlive the lease on purpose: during an outage no
   * lease can be renewed, yet the work is done, and the fence (status live, same generation, same instance)
   * makes every attempt safe — a task the janitor failed meanwhile, or another run took, refuses the write
   * instead of taking it twice. After an outage the janitor waits one lease period of good health before it
   * fails lapsed leases, which is when these retries land. Null when it never landed: that is logged and
   * counted in mcp_task_write_failures_total{op}, and the janitor fails the task "worker lost". A write
   * whose data PostgreSQL can never store is not retried at all: it comes back as Unstorable.
   */
  private async writeWithRetry<R>(
    entry: RunningTask,
    op: WriteOp,
    write: () => Promise<R>,
  ): Promise<R | Unstorable | null> {
    const started = performance.now();
    // An attempt whose COMMIT answer was lost and not yet found out: the next attempt asks whether it
    // landed before writing again, since a second write would find the task no longer the run's.
    let unresolved: UnresolvedWriteError<R> | undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        const landed = unresolved && (await this.repo.landed(unresolved));
        unresolved = undefined;
        const r = landed ? landed.value : await write();
        if (attempt > 1) this.metrics.writeRetried(op, attempt);
        return r;
      } catch (err) {
        if (err instanceof UnresolvedWriteError) unresolved = err as UnresolvedWriteError<R>;
        const unstorable = unstorableReason(err);
        if (unstorable !== null) {
          this.metrics.writeFailed(op);
          const cause = err instanceof UnstorableValueError ? '' : ` (${errorMessage(err)})`;
          this.logger.error(
            `the ${op} of task ${entry.fence.taskId} cannot be stored: ${unstorable}${cause}`,
          );
          return { unstorable };
        }
        const retryable = !(err instanceof TaskError) || err.code === TaskErrorCode.TASK_BUSY;
        const delay =
          Math.min(WRITE_RETRY_CAP_MS, WRITE_RETRY_BASE_MS * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2);
        const windowLeft = started + this.config.TASK_WRITE_RETRY_MS - performance.now();
        if (!retryable || windowLeft <= delay || entry.lost || entry.shutdown) {
          this.metrics.writeFailed(op);
          this.logger.error(
            `could not write the ${op} of task ${entry.fence.taskId} after ${attempt} attempt(s): ${errorMessage(err)}`,
          );
          return null;
        }
        this.logger.warn(
          `writing the ${op} of task ${entry.fence.taskId} failed (attempt ${attempt}): ${errorMessage(err)}; retrying`,
        );
        await sleep(delay);
      }
    }
  }
}

/** The run's span records what became of the task (the state change it caused, or the dropped write). */
function traceOutcome(
  span: Span,
  outcome: TaskOutcome,
  result: { applied: boolean; task?: TaskSnapshot | null },
): void {
  if (!span.isRecording()) return;
  if (!result.applied) {
    span.addEvent('task.stale_write_dropped', { 'mcp.task.outcome': outcome.kind });
    return;
  }
  const status = result.task?.status ?? outcome.kind;
  span.addEvent('task.status', { 'mcp.task.status': status });
  span.setAttribute('mcp.task.status', status);
  if (outcome.kind === 'failed') {
    span.setAttribute('error.type', String(outcome.error.code));
    span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error.message });
  } else if (outcome.kind === 'completed' && outcome.result.isError === true) {
    span.setAttribute('error.type', 'tool_error');
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'tool returned isError' });
  }
}

/** The requeue of a failed attempt, the `failures`-th: its backoff, and the statusMessage that says so. */
function retryWrite(entry: RunningTask, failure: RetryableFailure, failures: number) {
  const delayMs = backoffMs(failure.backoff, failures);
  const statusMessage = retryStatusMessage(
    entry.attempt,
    failures,
    entry.maxAttempts,
    failure.lastError.message,
    delayMs,
  );
  return { delayMs, failed: true as const, lastError: failure.lastError, statusMessage };
}
