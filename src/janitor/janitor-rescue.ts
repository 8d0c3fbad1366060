import { attemptsExhausted, rescuedMessage, WORKER_LOST_MESSAGE } from '../tasks/task-failures.js';
import type { RescuePlan } from '../tasks/store/task-row-writer.js';
import type { TaskStatus } from '../tasks/task-state.js';
import type { TaskErrorPayload } from '../tasks/task.types.js';

/** What the janitor reads of a task whose worker was lost, to decide its rescue. */
export interface LostRun {
  id: string;
  status: TaskStatus;
  resumable: boolean;
  /** The run that was lost. */
  attempt: number;
  failedAttempts: number;
  maxAttempts: number;
}

const LOST: TaskErrorPayload = { code: -32603, message: WORKER_LOST_MESSAGE };

/**
 * The rescue of one task whose worker was lost (a lapsed lease, a stopped or silent instance). A resumable
 * task that is working and has budget left (the lost run counts as failed) is re-queued as its next
 * attempt, to go on from its last checkpoint on whichever instance claims it; one without budget fails
 * naming its attempts and the loss. Everything else fails "worker lost": a plain task, and a resumable one waiting on legacy input over its worker's stream (the
 * request it waits on was held by that worker).
 */
export function planRescue(run: LostRun): RescuePlan {
  if (!run.resumable || run.status !== 'working') {
    return {
      id: run.id,
      requeue: false,
      statusMessage: WORKER_LOST_MESSAGE,
      error: LOST,
      lastError: null,
      countFailure: false,
    };
  }
  if (run.failedAttempts + 1 < run.maxAttempts) {
    return { id: run.id, requeue: true, statusMessage: rescuedMessage(run.attempt), lastError: LOST };
  }
  // Named like an exhausted retry: the failed runs, this lost one included (hand-overs are not failures).
  const error = attemptsExhausted(run.failedAttempts + 1, WORKER_LOST_MESSAGE);
  return {
    id: run.id,
    requeue: false,
    statusMessage: error.message,
    error,
    lastError: LOST,
    countFailure: true,
  };
}
