/** First retry of a failed delivery step, then doubling up to the cap. */
export const RETRY_FIRST_MS = 100;
export const RETRY_MAX_MS = 5000;

/**
 * The retry of one delivery step (a stream's drain, a subscription's re-read, the collection of a parked
 * answer) after it failed: a wake-up over the bus comes only with the next change or a LISTEN reconnect, so
 * a read that failed while the LISTEN connection stayed up would otherwise wait for ever. At most one timer
 * is pending per step (bounded exponential: RETRY_FIRST_MS doubling to RETRY_MAX_MS, reset by a success),
 * and `stop()`, called when its stream or waiter ends, clears it for good.
 */
export class RetryBackoff {
  private timer: NodeJS.Timeout | undefined;
  private failures = 0;
  private stopped = false;
  /** The delay of the retry scheduled last (tests, logs). */
  lastDelayMs = 0;

  constructor(
    private readonly run: () => void,
    private readonly firstMs = RETRY_FIRST_MS,
    private readonly maxMs = RETRY_MAX_MS,
  ) {}

  /** The step failed: run it again after the next delay, unless a retry is already due. */
  failed(): void {
    if (this.stopped || this.timer) return;
    const delay = Math.min(this.maxMs, this.firstMs * 2 ** Math.min(this.failures, 30));
    this.failures++;
    this.lastDelayMs = delay;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (!this.stopped) this.run();
    }, delay);
    this.timer.unref();
  }

  /** The step succeeded: the next failure starts again from the first delay. */
  succeeded(): void {
    this.failures = 0;
  }

  /** Whether a retry is scheduled (tests, metrics). */
  get pending(): boolean {
    return this.timer !== undefined;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
