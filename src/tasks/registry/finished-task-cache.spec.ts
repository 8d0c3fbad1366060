import { FinishedTaskCache } from './finished-task-cache.js';
import type { TaskSnapshot } from '../task.types.js';

const task = (id: string, text = 'x'): TaskSnapshot =>
  ({
    id,
    ownerId: 'o',
    status: 'completed',
    result: { content: [{ type: 'text', text }] },
    error: null,
    requestParams: {},
    statusMessage: null,
  }) as unknown as TaskSnapshot;

describe('FinishedTaskCache bounds', () => {
  it('keeps at most maxEntries, oldest out first', () => {
    const c = new FinishedTaskCache(2, 1_000_000);
    const now = performance.now();
    c.put(task('a'), now, 60000);
    c.put(task('b'), now, 60000);
    c.put(task('c'), now, 60000);
    expect(c.size).toBe(2);
    expect(c.get('o', 'a')).toBeNull();
    expect(c.get('o', 'c')?.task.id).toBe('c');
  });

  it('keeps at most maxBytes, and no entry over the per-entry share', () => {
    const c = new FinishedTaskCache(100, 64 * 2000, 2000);
    const now = performance.now();
    c.put(task('big', 'y'.repeat(5000)), now, 60000);
    expect(c.get('o', 'big')).toBeNull();
    for (let i = 0; i < 100; i++) c.put(task(`t${i}`, 'z'.repeat(1000)), now, 60000);
    expect(c.size).toBeLessThan(100);
    expect(c.get('o', 't99')).not.toBeNull();
  });

  it('never answers past the expiry it was given, nor for a task already expired', () => {
    const c = new FinishedTaskCache(10, 1_000_000);
    const now = performance.now();
    c.put(task('gone'), now - 5000, 1000);
    expect(c.get('o', 'gone')).toBeNull();
    c.put(task('late'), now, -1);
    expect(c.get('o', 'late')).toBeNull();
  });
});
