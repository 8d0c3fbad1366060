import type { TaskSnapshot, VersionedTask } from '../../task.types.js';
import { RetryBackoff } from '../../../common/retry-backoff.js';

/**
 * One subscriptions/listen stream's view of its tasks. NOTIFYs only say "look again"; what is sent comes from
 * the table: each task's change version is compared with the last one this stream sent, so a state is sent
 * once, never an older one after a newer one (reads are serialised), and after the bus was down a resync
 * re-reads every task and sends whatever changed meanwhile (the newest state; this era has no replay). A read
 * that fails is tried again with backoff until it succeeds or the subscription closes: the NOTIFY that asked
 * for it has been consumed, and nothing else may come to ask again.
 */
export class TaskSubscription {
  private readonly sent = new Map<string, number>();
  private readonly pending = new Set<string>();
  private chain: Promise<void>;
  private queued = false;
  private closed = false;
  private readonly retry: RetryBackoff;

  constructor(
    private readonly read: (ids: string[]) => Promise<VersionedTask[]>,
    private readonly deliver: (task: TaskSnapshot) => void,
    private readonly onError: (err: unknown) => void,
    /** The subscribed tasks as they were when the subscription was set up: nothing older is sent. */
    baseline: Promise<VersionedTask[]>,
    retry?: (run: () => void) => RetryBackoff,
  ) {
    const again = (): void => this.queueDrain();
    this.retry = retry ? retry(again) : new RetryBackoff(again);
    this.chain = baseline.then(
      (rows) => {
        for (const r of rows) this.sent.set(r.task.id, r.version);
      },
      (err: unknown) => this.onError(err),
    );
  }

  get taskIds(): string[] {
    return [...this.sent.keys()];
  }

  /** Something about `taskId` changed (or, without an id, maybe anything did): re-read and send what is new. */
  wake(taskId?: string): void {
    if (this.closed) return;
    if (taskId === undefined) for (const id of this.sent.keys()) this.pending.add(id);
    else this.pending.add(taskId);
    this.queueDrain();
  }

  close(): void {
    this.closed = true;
    this.retry.stop();
  }

  private queueDrain(): void {
    if (this.closed || this.queued) return; // the queued read will pick it up
    this.queued = true;
    this.chain = this.chain.then(() => this.drain());
  }

  /** Resolves when every read asked for so far is done (tests, shutdown). */
  settled(): Promise<void> {
    return this.chain;
  }

  private async drain(): Promise<void> {
    this.queued = false;
    const ids = [...this.pending].filter((id) => this.sent.has(id));
    this.pending.clear();
    if (this.closed || ids.length === 0) return;
    let rows: VersionedTask[];
    try {
      rows = await this.read(ids);
    } catch (err) {
      // Keep them pending for the retry (or an earlier wake-up, which reads them with its own ids).
      for (const id of ids) this.pending.add(id);
      this.onError(err);
      this.retry.failed();
      return;
    }
    this.retry.succeeded();
    for (const { task, version } of rows) {
      if (this.closed) return;
      if (version <= (this.sent.get(task.id) ?? Infinity)) continue;
      this.sent.set(task.id, version);
      this.deliver(task);
    }
  }
}
