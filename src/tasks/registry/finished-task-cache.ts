import type { TaskSnapshot } from '../task.types.js';

interface Entry {
  task: TaskSnapshot;
  /** performance.now() by which the task's ttl has certainly not run out yet (see put). */
  validUntil: number;
  bytes: number;
}

/**
 * Finished tasks as an owner last read them, for the reads that follow (a client polling until it notices
 * the end, then asking for the result). A terminal task never changes again, and the only thing that removes
 * one is the janitor, after its ttl plus TASK_EXPIRED_GRACE_MS; so until its ttl runs out, a finished task
 * read from here is exactly what the database would answer. Keyed by owner and id: another owner's read
 * never finds an entry and goes to the database (and its "not found"). Bounded by entries and by bytes;
 * large results are not kept.
 */
export class FinishedTaskCache {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly maxBytes: number,
    private readonly maxEntryBytes = Math.floor(maxBytes / 64),
  ) {}

  get size(): number {
    return this.entries.size;
  }

  get(ownerId: string, taskId: string): { task: TaskSnapshot; msUntilExpiry: number } | null {
    const key = keyOf(ownerId, taskId);
    const e = this.entries.get(key);
    if (!e) return null;
    const left = e.validUntil - performance.now();
    if (left <= 0) {
      this.remove(key, e);
      return null;
    }
    return { task: e.task, msUntilExpiry: left };
  }

  /**
   * `readStartedAt` is performance.now() taken before the read was sent, and `msUntilExpiry` the database's
   * expires_at − now() of that read. The database's now() came after readStartedAt, so readStartedAt +
   * msUntilExpiry is no later than the expiry itself, whatever the clocks say.
   */
  put(task: TaskSnapshot, readStartedAt: number, msUntilExpiry: number): void {
    if (this.maxEntries <= 0 || msUntilExpiry <= 0) return;
    const bytes = approximateBytes(task);
    if (bytes > this.maxEntryBytes) return;
    const key = keyOf(task.ownerId, task.id);
    const old = this.entries.get(key);
    if (old) this.remove(key, old);
    this.entries.set(key, { task, validUntil: readStartedAt + msUntilExpiry, bytes });
    this.bytes += bytes;
    for (const [k, e] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.bytes <= this.maxBytes) break;
      this.remove(k, e);
    }
  }

  private remove(key: string, e: Entry): void {
    this.entries.delete(key);
    this.bytes -= e.bytes;
  }
}

function keyOf(ownerId: string, taskId: string): string {
  return `${taskId}\u0000${ownerId}`;
}

/** Result, error and request parameters dominate a snapshot's size; the rest is a few hundred bytes. */
function approximateBytes(t: TaskSnapshot): number {
  const size = (v: unknown): number => (v === null || v === undefined ? 0 : JSON.stringify(v).length);
  return 512 + size(t.result) + size(t.error) + size(t.requestParams) + (t.statusMessage?.length ?? 0);
}
