/**
 * Token buckets keyed by a caller (a principal id, a client address). Each key holds up to `burst` tokens and
 * regains `ratePerSecond` a second; a request takes one. Memory is bounded: at most `maxKeys` buckets are
 * kept, least recently used first out. A forgotten bucket comes back full, so eviction only ever errs on
 * the side of letting a caller through, never of refusing one.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly ratePerSecond: number,
    private readonly burst: number,
    private readonly maxKeys = 100000,
  ) {}

  get enabled(): boolean {
    return this.ratePerSecond > 0;
  }

  /** Buckets held (bounded by maxKeys). */
  get size(): number {
    return this.buckets.size;
  }

  /** Takes a token for `key`: 0 when allowed, else the milliseconds until one is available. */
  take(key: string, now = Date.now()): number {
    if (!this.enabled) return 0;
    const held = this.buckets.get(key);
    let tokens = this.burst;
    if (held) {
      tokens = Math.min(this.burst, held.tokens + ((now - held.at) / 1000) * this.ratePerSecond);
      this.buckets.delete(key); // re-inserted below: Map order is then least recently used first
    } else if (this.buckets.size >= this.maxKeys) {
      const oldest = this.buckets.keys().next().value;
      if (oldest !== undefined) this.buckets.delete(oldest);
    }
    if (tokens >= 1) {
      this.buckets.set(key, { tokens: tokens - 1, at: now });
      return 0;
    }
    this.buckets.set(key, { tokens, at: now });
    return Math.ceil(((1 - tokens) / this.ratePerSecond) * 1000);
  }
}
