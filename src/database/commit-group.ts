/** A group's answer for one entry that it did not settle: run that entry on its own path instead. */
export const ON_ITS_OWN = Symbol('on its own');

export interface CommitGroupOptions<E, R> {
  /** Most entries in one group (1: every entry on its own). */
  maxGroup: number;
  /** Groups in flight at once; entries arriving meanwhile wait and go together in the next group. */
  maxInFlight: number;
  /**
   * Runs several entries in one transaction and answers per entry, in order; ON_ITS_OWN for an entry the
   * group left alone. Throwing means the group did not commit, or may have (its COMMIT's answer was lost):
   * every entry then runs on its own, so runOne must recognise an entry whose write the group landed.
   */
  runGroup: (entries: E[]) => Promise<Array<R | typeof ON_ITS_OWN>>;
  /**
   * The one-entry path, with its exact errors: a group of one, and every entry a group gave back. It finds
   * out what an earlier attempt landed (its own ids, its own outcome) and answers with that.
   */
  runOne: (entry: E) => Promise<R>;
  /**
   * Called once per batch as it leaves the queue, before it runs (group or alone): decisions that must be
   * as late as the write itself (where a created task runs). Must not throw.
   */
  prepare?: (entries: E[]) => void;
  /** Told each group's size once it has run (a metric). */
  onGroup?: (size: number, fellBack: boolean) => void;
}

interface Waiting<E, R> {
  entry: E;
  resolve: (r: R) => void;
  reject: (e: unknown) => void;
}

/**
 * Group commit for independent writes: while a group's transaction is in flight, the writes that arrive
 * wait, then go together in one transaction (one commit, one flush, the round trips shared). Nothing waits
 * for a timer: an idle queue starts a write on the next turn of the event loop, so a lone write pays no
 * added latency, and under load the groups grow with it. A group never decides an entry's error: any
 * failure runs the entries again one by one on the ordinary path, so every caller gets the answer it
 * would have got alone; a group whose commit may have landed unheard is no exception, since that path
 * recognises what landed.
 */
export class CommitGroupQueue<E, R> {
  private readonly waiting: Array<Waiting<E, R>> = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(private readonly options: CommitGroupOptions<E, R>) {}

  submit(entry: E): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.waiting.push({ entry, resolve, reject });
      this.schedule();
    });
  }

  /** Entries waiting for a group (a gauge for tests and metrics). */
  get pending(): number {
    return this.waiting.length;
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.options.maxInFlight) return;
    this.scheduled = true;
    // One turn of the event loop: writes submitted by the same burst of requests share the group.
    setImmediate(() => {
      this.scheduled = false;
      this.drain();
    });
  }

  private drain(): void {
    while (this.inFlight < this.options.maxInFlight && this.waiting.length > 0) {
      const batch = this.waiting.splice(0, Math.max(1, this.options.maxGroup));
      this.options.prepare?.(batch.map((w) => w.entry));
      this.inFlight++;
      void this.run(batch).finally(() => {
        this.inFlight--;
        if (this.waiting.length > 0) this.schedule();
      });
    }
  }

  private async run(batch: Array<Waiting<E, R>>): Promise<void> {
    if (batch.length === 1) {
      await this.alone(batch[0]);
      this.options.onGroup?.(1, false);
      return;
    }
    let answers: Array<R | typeof ON_ITS_OWN>;
    try {
      answers = await this.options.runGroup(batch.map((w) => w.entry));
      if (answers.length !== batch.length) throw new Error('a commit group answered for the wrong count');
    } catch {
      this.options.onGroup?.(batch.length, true);
      await Promise.all(batch.map((w) => this.alone(w)));
      return;
    }
    this.options.onGroup?.(batch.length, false);
    const left: Array<Promise<void>> = [];
    batch.forEach((w, i) => {
      const answer = answers[i];
      if (answer === ON_ITS_OWN) left.push(this.alone(w));
      else w.resolve(answer);
    });
    await Promise.all(left);
  }

  private async alone(w: Waiting<E, R>): Promise<void> {
    try {
      w.resolve(await this.options.runOne(w.entry));
    } catch (err) {
      w.reject(err);
    }
  }
}

/** kind: what the group committed; size: its entries; fellBack: it failed and each entry ran alone. */
export type CommitGroupListener = (kind: 'create' | 'finish', size: number, fellBack: boolean) => void;
