import type { ProgressUpdate } from '../../tool-dispatch/tool-context.js';

/**
 * Keeps at most one write per interval for a stream of progress messages: the first message is written at
 * once, later ones within the interval collapse into a single trailing write of the latest message. A chatty
 * tool (progress on every item) therefore costs one UPDATE per interval, and the last message still lands.
 * Write failures are reported to `onError` and never reach the tool.
 */
export class ProgressThrottle {
  private latest: string | null = null;
  private lastWriteAt = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly write: (message: string) => Promise<void>,
    private readonly intervalMs: number,
    private readonly onError: (err: unknown) => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  report(message: string): void {
    if (this.stopped) return;
    this.latest = message;
    if (this.timer || this.writing) return;
    const wait = this.lastWriteAt + this.intervalMs - this.now();
    if (wait <= 0) this.flush();
    else this.schedule(wait);
  }

  /** No more writes; waits for one in flight, so the caller's final write comes after it. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.writing;
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush();
    }, ms);
    this.timer.unref();
  }

  private flush(): void {
    const message = this.latest;
    if (this.stopped || message === null) return;
    this.latest = null;
    this.lastWriteAt = this.now();
    this.writing = this.write(message)
      .catch((err: unknown) => this.onError(err))
      .finally(() => {
        this.writing = undefined;
        // A message that arrived during the write goes out after the interval.
        if (this.latest !== null && !this.stopped) {
          this.schedule(Math.max(0, this.lastWriteAt + this.intervalMs - this.now()));
        }
      });
  }
}

/** The statusMessage a progress update stands for: its own message, else "progress n[/total]". */
export function progressMessage(u: ProgressUpdate): string {
  if (typeof u.message === 'string' && u.message.length > 0) return u.message.slice(0, 1000);
  return u.total === undefined ? `progress ${u.progress}` : `progress ${u.progress}/${u.total}`;
}
