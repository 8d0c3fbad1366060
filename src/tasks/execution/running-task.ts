import type { Span } from '@opentelemetry/api';
import type { ProgressThrottle } from './progress-throttle.js';
import type { ExpiryReading, WorkerFence } from '../store/task-worker.repository.js';
import type { TaskSnapshot } from '../task.types.js';
import type { ProgressUpdate } from '../../tool-dispatch/tool-context.js';

/** One run of a task on this instance: a task id at one generation (a resume is a new run). */
export interface RunningTask {
  fence: WorkerFence;
  /** Whose task it is: only the owner's reads may wait for its outcome (see outcomeInFlight). */
  ownerId: string;
  toolName: string;
  createdAt: Date;
  /**
   * The tool declared the work resumable: at shutdown the run is handed over to the queue, not failed
   * (cleared when the hand-over is refused: the run then ends as a plain one).
   */
  resumable: boolean;
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
  /** The task's run number and retry budget as the run started (TaskSnapshot; a hand-over names the next). */
  attempt: number;
  failedAttempts: number;
  maxAttempts: number;
  /** The run's checkpoint writes; the outcome is written after the last of them. */
  checkpoints: CheckpointChain;
}

/**
 * A run's checkpoint writes, one after another: each waits for the one before, so an older state never
 * lands after a newer one, and the run's final write can wait for all of them (a re-queue after the last
 * checkpoint must not be overtaken by it, or the fence would refuse the checkpoint).
 */
export class CheckpointChain {
  private last: Promise<void> = Promise.resolve();

  constructor(private readonly write: (state: unknown) => Promise<void>) {}

  save(state: unknown): Promise<void> {
    const next = this.last.then(() => this.write(state));
    this.last = next.catch(() => undefined);
    return next;
  }

  /** Settles when every write asked for so far has landed or failed. */
  settled(): Promise<void> {
    return this.last;
  }
}

/** What the runner hands back for work it took over (TaskRunnerService.adopt). */
export interface RunHandle {
  /** Where the work's progress goes from now on (the task's statusMessage). */
  report(update: ProgressUpdate): void;
  /** Where the work's checkpoints go from now on (fenced writes, in order). */
  checkpoint(state: unknown): Promise<void>;
  /** Settles when the run's outcome has been written (or given up): what it wrote, if it landed. */
  done: Promise<WrittenOutcome | undefined>;
}

/** A run's final write as it landed: the task it left, and its expiry by the database clock when known. */
export interface WrittenOutcome {
  task: TaskSnapshot;
  expiry?: ExpiryReading;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
