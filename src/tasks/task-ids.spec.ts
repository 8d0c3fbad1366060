import { decodeCursor, encodeCursor, isWellFormedTaskId, newTaskId } from './task-ids.js';
import { TaskError, TaskErrorCode } from './tasks.errors.js';

describe('task ids', () => {
  it('are url-safe, 24 characters (144 random bits) and distinct', () => {
    const ids = new Set(Array.from({ length: 2000 }, newTaskId));
    expect(ids.size).toBe(2000);
    for (const id of ids) {
      expect(id).toMatch(/^[A-Za-z0-9_-]{24}$/);
      expect(isWellFormedTaskId(id)).toBe(true);
    }
  });

  it('never start with -, and start with each of the other 63 characters about equally often', () => {
    // Without the redraw, 1 id in 64 starts with - (about 3,100 of these); a command line reads it as an option.
    const n = 200_000;
    const firsts = new Map<string, number>();
    for (let i = 0; i < n; i++) {
      const c = newTaskId()[0];
      firsts.set(c, (firsts.get(c) ?? 0) + 1);
    }
    expect(firsts.get('-')).toBeUndefined();
    expect(firsts.size).toBe(63);
    // Each expected n / 63 ≈ 3,175 times (standard deviation ≈ 56): a biased draw shows far outside ±15 %.
    for (const count of firsts.values()) {
      expect(count).toBeGreaterThan((n / 63) * 0.85);
      expect(count).toBeLessThan((n / 63) * 1.15);
    }
  });

  it('rejects malformed ids', () => {
    for (const bad of ['', 'a b', 'x'.repeat(129), 'id/..', null, 42])
      expect(isWellFormedTaskId(bad)).toBe(false);
  });
});

describe('list cursors', () => {
  it('round-trip the position', () => {
    const pos = { createdAt: new Date('2026-01-02T03:04:05.678Z'), id: newTaskId() };
    expect(decodeCursor(encodeCursor(pos))).toEqual(pos);
  });

  const b64 = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url');

  it.each([
    ['empty', ''],
    ['not base64url', 'abc$%'],
    ['not JSON', Buffer.from('nope').toString('base64url')],
    ['an object', b64({ a: 1 })],
    ['wrong arity', b64(['2026-01-02T03:04:05.678Z'])],
    ['bad date', b64(['yesterday', 'abc'])],
    ['impossible date', b64(['2026-13-45T03:04:05.678Z', 'abc'])],
    ['bad id', b64(['2026-01-02T03:04:05.678Z', 'a b'])],
    ['too long', 'a'.repeat(600)],
  ])('reject %s with INVALID_CURSOR', (_name, cursor) => {
    let err: unknown;
    try {
      decodeCursor(cursor);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TaskError);
    expect((err as TaskError).code).toBe(TaskErrorCode.INVALID_CURSOR);
  });
});
