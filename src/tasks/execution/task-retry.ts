import type { TaskErrorPayload } from '../task.types.js';

/** The waits of a retry policy (RetryPolicy, defaults applied). */
export interface Backoff {
  initialDelayMs: number;
  factor: number;
  maxDelayMs: number;
}

/**
 * A run's handler threw an error its tool's retry policy retries. Thrown by the protocol layer in place of
 * the tool error result the error would otherwise have become; the outcome recorder then re-queues the task
 * for its next attempt after the backoff, or fails it once the attempts are spent.
 */
export class RetryableFailure extends Error {
  constructor(
    /** What the failed run is remembered by (last_error), and named by once the attempts run out. */
    readonly lastError: TaskErrorPayload,
    readonly backoff: Backoff,
  ) {
    super(lastError.message);
    this.name = 'RetryableFailure';
  }
}

/** The wait after the `failures`-th failed run: initialDelayMs × factor^(failures − 1), capped at maxDelayMs. */
export function backoffMs(b: Backoff, failures: number): number {
  const raw = b.initialDelayMs * b.factor ** Math.max(0, failures - 1);
  return Math.floor(Math.min(b.maxDelayMs, raw));
}

/** "200 ms", "1.5 s", "2 min": how long the wait is, as tasks/get shows it. */
export function humanDelay(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${Math.round(ms / 100) / 10} s`;
  return `${Math.round(ms / 6000) / 10} min`;
}

/** Longest error text a statusMessage quotes (the whole error is kept as last_error). */
const QUOTED_ERROR_CHARS = 300;

/**
 * The statusMessage of a task waiting out its backoff: the attempt that failed and why, and when the next
 * one runs (ISO time and how long from now), e.g. "Attempt 1 failed: timeout; attempt 2 of 5 runs at
 * 2026-12-01T16:00:00.200Z (in 200 ms)". `maxAttempts` counts failed runs, so with hand-overs the run
 * number can pass it; the budget left is what "of N" tells.
 */
export function retryStatusMessage(
  failedRun: number,
  failures: number,
  maxAttempts: number,
  error: string,
  delayMs: number,
  now: Date = new Date(),
): string {
  const quoted = error.length > QUOTED_ERROR_CHARS ? `${error.slice(0, QUOTED_ERROR_CHARS)}…` : error;
  const at = new Date(now.getTime() + delayMs).toISOString();
  return (
    `Attempt ${failedRun} failed: ${quoted}; retry ${failures} of ${maxAttempts - 1} ` +
    `(attempt ${failedRun + 1}) runs at ${at} (in ${humanDelay(delayMs)})`
  );
}
