import type { TaskErrorPayload } from './task.types.js';

/*
 * The texts a task the server itself fails carries, as clients and operators see them (tests and runbooks
 * match on them): changing one changes the API.
 */

/** A live task past created + ttl by the database clock (lazy expiry, lease renewal, the janitor). */
export const EXPIRED: TaskErrorPayload = { code: -32603, message: 'Task expired' };

/** A task whose worker's lease lapsed, or whose instance stopped or went silent (the janitor, startup). */
export const WORKER_LOST_MESSAGE = 'worker lost: the server running this task stopped';

/** A task still running on an instance whose shutdown grace ran out (the task runner's drain). */
export const SHUTDOWN_ERROR: TaskErrorPayload = { code: -32603, message: 'server shutting down' };
export const SHUTDOWN_STATUS = 'server shutting down: the task was interrupted';

/**
 * A task whose retry budget is spent: its last run failed (a handler error the policy retries, or a lost
 * worker) and no attempts are left. `attempts` is the number of failed runs, `lastMessage` the last error.
 */
export function attemptsExhausted(attempts: number, lastMessage: string): TaskErrorPayload {
  return { code: -32603, message: `Failed after ${attempts} attempts: ${lastMessage}` };
}

/** The statusMessage of a resumable task this instance released at shutdown (TaskRunnerService). */
export function handedOverMessage(nextAttempt: number): string {
  return `Handed over at shutdown: attempt ${nextAttempt} waits for a worker`;
}

/** The statusMessage of a resumable task the janitor re-queued after its worker was lost. */
export function rescuedMessage(lostAttempt: number): string {
  return `Rescued: the worker of attempt ${lostAttempt} was lost; attempt ${lostAttempt + 1} waits for a worker`;
}
