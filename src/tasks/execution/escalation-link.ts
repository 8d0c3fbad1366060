import type { ProgressUpdate } from '../../tool-dispatch/tool-context.js';
import { CheckpointError } from '../../tool-dispatch/checkpoint.js';
import type { RunHandle } from './running-task.js';

/**
 * Where the progress and checkpoints of work run inside an inline window go (TaskCreationService's
 * runInlineThenTask). Before escalation the caller sends progress on the request's own response; from the
 * moment the window runs out that response belongs to the CreateTaskResult, so progress goes to the task
 * (its statusMessage) and nothing else may be written to the response.
 */
export class EscalationLink {
  /** The window ran out: the request's response is no longer the work's to write to. */
  escalated = false;
  private reporter: ((u: ProgressUpdate) => void) | null = null;
  private pending: ProgressUpdate | null = null;
  private saver: ((state: unknown) => Promise<void>) | null = null;
  /** The latest state the work saved before there was a task to save it on (checked already). */
  private pendingCheckpoint: { state: unknown } | undefined;

  /**
   * `serialise`: the checkpoint's stored JSON (QuotaService.checkpointJson: checked against
   * QUOTA_TASK_CHECKPOINT_BYTES and counted when refused), applied at once even while no task exists yet.
   */
  constructor(private readonly serialise: (state: unknown) => string) {}

  /**
   * A checkpoint from the work: checked (JSON, size) at once; before the task exists only the latest is
   * kept (in memory), and written first thing when the call becomes a task.
   */
  async checkpoint(state: unknown): Promise<void> {
    if (this.saver) return this.saver(state);
    // A copy as JSON, so later changes the work makes to its own object are not what gets written.
    this.pendingCheckpoint = { state: JSON.parse(this.serialise(state)) };
  }

  /**
   * Fences the inline run out for good (the call is queued for another run): from now on its checkpoints are
   * refused, and the last one it saved is returned, to be written with the queued row.
   */
  close(): { state: unknown } | undefined {
    this.saver = () =>
      Promise.reject(
        new CheckpointError('The checkpoint was not saved: this run was given up and the task queued'),
      );
    return this.takePendingCheckpoint();
  }

  /** The checkpoint kept while inline, to be written on the task (once). */
  takePendingCheckpoint(): { state: unknown } | undefined {
    const p = this.pendingCheckpoint;
    this.pendingCheckpoint = undefined;
    return p;
  }

  /** Progress from the work; kept (latest only) until the task exists, then handed to it. */
  report(u: ProgressUpdate): void {
    if (!this.escalated) return;
    if (this.reporter) this.reporter(u);
    else this.pending = u;
  }

  attach(handle: Pick<RunHandle, 'report' | 'checkpoint'>): void {
    const reporter = (u: ProgressUpdate): void => handle.report(u);
    this.reporter = reporter;
    this.saver = (state) => handle.checkpoint(state);
    if (this.pending) reporter(this.pending);
    this.pending = null;
  }
}
