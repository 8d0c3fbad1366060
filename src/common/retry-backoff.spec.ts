import { RetryBackoff } from './retry-backoff.js';

/** Waits (bounded) for the backoff's own timer to have run the step. */
async function ran(runs: () => number, n: number): Promise<void> {
  for (let i = 0; i < 500 && runs() < n; i++) await new Promise((r) => setTimeout(r, 2));
  if (runs() < n) throw new Error(`the retry did not run ${n} times`);
}

describe('RetryBackoff', () => {
  it('doubles from the first delay up to the cap, one timer at a time, and starts over after a success', async () => {
    let runs = 0;
    const retry = new RetryBackoff(() => runs++, 1, 8);
    const delays: number[] = [];
    for (let i = 0; i < 6; i++) {
      retry.failed();
      retry.failed(); // already due: not a second timer, not a longer delay
      delays.push(retry.lastDelayMs);
      await ran(() => runs, i + 1);
    }
    expect(delays).toEqual([1, 2, 4, 8, 8, 8]);
    retry.succeeded();
    retry.failed();
    expect(retry.lastDelayMs).toBe(1);
    retry.stop();
  });

  it('never runs again once stopped, and schedules nothing after', () => {
    const retry = new RetryBackoff(() => {
      throw new Error('must not run');
    });
    retry.failed();
    expect(retry.pending).toBe(true);
    retry.stop();
    expect(retry.pending).toBe(false);
    retry.failed();
    expect(retry.pending).toBe(false);
  });
});
