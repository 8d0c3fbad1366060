import { ProgressThrottle, progressMessage } from './progress-throttle.js';

describe('ProgressThrottle', () => {
  it('writes the first message at once and collapses a burst into one trailing write of the latest', async () => {
    const written: string[] = [];
    let t = 0;
    const throttle = new ProgressThrottle(
      async (m) => {
        written.push(m);
      },
      50,
      () => undefined,
      () => t,
    );
    throttle.report('1');
    await Promise.resolve();
    for (let i = 2; i <= 100; i++) throttle.report(String(i));
    expect(written).toEqual(['1']);
    t = 50;
    await new Promise((r) => setTimeout(r, 80));
    expect(written).toEqual(['1', '100']);
    await throttle.stop();
  });

  it('never writes after stop and swallows write failures', async () => {
    const errors: unknown[] = [];
    const throttle = new ProgressThrottle(
      () => Promise.reject(new Error('db down')),
      1000,
      (e) => errors.push(e),
    );
    throttle.report('a');
    await throttle.stop();
    throttle.report('b');
    expect(errors).toHaveLength(1);
  });

  it('names progress without a message by its numbers', () => {
    expect(progressMessage({ progress: 2, total: 5 })).toBe('progress 2/5');
    expect(progressMessage({ progress: 2 })).toBe('progress 2');
    expect(progressMessage({ progress: 2, message: 'line 2' })).toBe('line 2');
  });
});
