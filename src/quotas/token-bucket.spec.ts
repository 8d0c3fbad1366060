import { TokenBuckets } from './token-bucket.js';

describe('TokenBuckets', () => {
  it('lets a burst through, then refuses with the time until the next token', () => {
    const b = new TokenBuckets(2, 3);
    const t0 = 1_000_000;
    expect([b.take('a', t0), b.take('a', t0), b.take('a', t0)]).toEqual([0, 0, 0]);
    // Empty: one token comes back every 500 ms at 2 per second.
    expect(b.take('a', t0)).toBe(500);
    expect(b.take('a', t0 + 250)).toBe(250);
    expect(b.take('a', t0 + 500)).toBe(0);
    expect(b.take('a', t0 + 500)).toBeGreaterThan(0);
  });

  it('refills at the rate and never above the burst', () => {
    const b = new TokenBuckets(10, 5);
    const t0 = 0;
    for (let i = 0; i < 5; i++) expect(b.take('k', t0)).toBe(0);
    expect(b.take('k', t0)).toBeGreaterThan(0);
    // An hour later the bucket holds the burst, not 36,000 tokens.
    const later = t0 + 3_600_000;
    for (let i = 0; i < 5; i++) expect(b.take('k', later)).toBe(0);
    expect(b.take('k', later)).toBeGreaterThan(0);
  });

  it('keeps one bucket per key: one caller emptying its bucket does not touch another', () => {
    const b = new TokenBuckets(1, 1);
    expect(b.take('a', 0)).toBe(0);
    expect(b.take('a', 0)).toBe(1000);
    expect(b.take('b', 0)).toBe(0);
  });

  it('holds at most maxKeys buckets, dropping the least recently used (which comes back full)', () => {
    const b = new TokenBuckets(1, 1, 3);
    for (const k of ['a', 'b', 'c']) expect(b.take(k, 0)).toBe(0);
    expect(b.take('a', 0)).toBeGreaterThan(0); // a is now the most recently used
    expect(b.take('d', 0)).toBe(0); // evicts b
    expect(b.size).toBe(3);
    expect(b.take('c', 0)).toBeGreaterThan(0); // still tracked, still empty
    expect(b.take('b', 0)).toBe(0); // forgotten, so full again
    for (let i = 0; i < 10000; i++) b.take(`junk-${i}`, 0);
    expect(b.size).toBe(3);
  });

  it('with a rate of 0 is off and keeps nothing', () => {
    const b = new TokenBuckets(0, 1);
    for (let i = 0; i < 100; i++) expect(b.take(`k${i}`, 0)).toBe(0);
    expect(b.enabled).toBe(false);
    expect(b.size).toBe(0);
  });
});
