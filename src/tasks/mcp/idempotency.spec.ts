import { idempotencyRequestHash } from './idempotency.js';

describe('idempotencyRequestHash (what makes a repeat the same call)', () => {
  const base = { name: 'report', arguments: { year: 2026, filters: { region: 'eu', active: true } } };

  it('is the tool and its arguments, whatever the key order', () => {
    const reordered = { arguments: { filters: { active: true, region: 'eu' }, year: 2026 }, name: 'report' };
    expect(idempotencyRequestHash(reordered)).toBe(idempotencyRequestHash(base));
    expect(idempotencyRequestHash(base)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('ignores the legacy ttl, _meta and MRTR answers', () => {
    const h = idempotencyRequestHash(base);
    expect(idempotencyRequestHash({ ...base, task: { ttl: 5000 } })).toBe(h);
    expect(idempotencyRequestHash({ ...base, _meta: { progressToken: 7 } })).toBe(h);
    expect(idempotencyRequestHash({ ...base, inputResponses: { a: 1 }, requestState: 'x' })).toBe(h);
  });

  it('differs for another tool or other arguments; absent arguments are {}', () => {
    const h = idempotencyRequestHash(base);
    expect(idempotencyRequestHash({ ...base, name: 'other' })).not.toBe(h);
    expect(idempotencyRequestHash({ ...base, arguments: { year: 2025 } })).not.toBe(h);
    expect(idempotencyRequestHash({ name: 'x' })).toBe(idempotencyRequestHash({ name: 'x', arguments: {} }));
  });
});
