import type { Span } from '@opentelemetry/api';
import type { ProgressThrottle } from './progress-throttle.js';
import type { ExpiryReading, WorkerFence } from './task-worker.repository.js';
import type { TaskSnapshot } from './task.types.js';

/** One run of a task on this instance: a task id at one generation (a resume is a new run). */
export interface RunningTask {
  fence: WorkerFence;
  /** Whose task it is: only the owner's reads may wait for its outcome (see outcomeInFlight). */
  ownerId: string;
  toolName: string;
  createdAt: Date;
  /** The tool declared the work resumable: at shutdown the run is handed over to the queue, not failed. */
  resumable: boolean;
  /** The task's attempt this run is (the hand-over names the next). */
  attempt: number;
  controller: AbortController;
  /** Progress → statusMessage, at most one write per TASK_PROGRESS_WRITE_MS. */
  progress: ProgressThrottle;
  /** Set when shutdown took the task over: the worker's own late outcome is then ignored. */
  shutdown: boolean;
  /**
   * The run gave its task back to the queue at shutdown (TaskWorkerRepository.requeue applied): the task is
   * another run's now, so this one's late outcome is ignored like a shut-down run's.
   */
  handedOver: boolean;
  /** The hand-over write in flight, if any (one at a time per run; a second ask waits for it). */
  handover?: Promise<void>;
  /** A renewal found the task is no longer this run's: it was aborted and dropped from the table at once. */
  lost: boolean;
  /** The work has returned; what is left is recording its outcome, so there is nothing to abort. */
  settled: boolean;
  done: Promise<void>;
  /** The outcome as written, once the final write applied (what a read waiting for it may answer). */
  written?: WrittenOutcome;
  /** The run's span, a child of the span that created the task (non-recording when tracing is off). */
  span: Span;
}

/** A run's final write as it landed: the task it left, and its expiry by the database clock when known. */
export interface WrittenOutcome {
  task: TaskSnapshot;
  expiry?: ExpiryReading;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
