import { attemptsExhausted } from '../task-failures.js';
import { backoffMs, humanDelay, retryStatusMessage } from './task-retry.js';
import { grantedTtlMs } from '../execution/task-creation.service.js';

describe('retry backoff and its status', () => {
  it('waits initialDelayMs × factor^(k−1) after the k-th failure, capped at maxDelayMs', () => {
    const b = { initialDelayMs: 200, factor: 2, maxDelayMs: 1000 };
    expect([1, 2, 3, 4, 5].map((k) => backoffMs(b, k))).toEqual([200, 400, 800, 1000, 1000]);
    expect(backoffMs({ initialDelayMs: 100, factor: 1.5, maxDelayMs: 60000 }, 3)).toBe(225);
    expect(backoffMs({ initialDelayMs: 0, factor: 2, maxDelayMs: 60000 }, 9)).toBe(0);
  });

  it('names the failed attempt, the error and when the next one runs', () => {
    const now = new Date('2026-12-01T16:00:00.000Z');
    expect(retryStatusMessage(1, 1, 5, 'timeout', 200, now)).toBe(
      'Attempt 1 failed: timeout; retry 1 of 4 (attempt 2) runs at 2026-12-01T16:00:00.200Z (in 200 ms)',
    );
    expect(retryStatusMessage(3, 2, 3, 'x'.repeat(400), 1500, now)).toBe(
      `Attempt 3 failed: ${'x'.repeat(300)}…; retry 2 of 2 (attempt 4) runs at 2026-12-01T16:00:01.500Z (in 1.5 s)`,
    );
    expect([999, 1000, 119_999, 600_000].map(humanDelay)).toEqual(['999 ms', '1 s', '120 s', '10 min']);
  });

  it('fails with -32603 naming the attempts and the last error once they are spent', () => {
    expect(attemptsExhausted(5, 'boom')).toEqual({ code: -32603, message: 'Failed after 5 attempts: boom' });
  });
});

describe('the ttl a task is granted (TasksService.grantTtl)', () => {
  const limits = { TASK_DEFAULT_TTL_MS: 3_600_000, TASK_MAX_TTL_MS: 86_400_000 };

  it('covers a declared longest run plus the default retention when the client asks for no ttl', () => {
    expect(grantedTtlMs(limits, null)).toBe(3_600_000);
    expect(grantedTtlMs(limits, null, 70 * 60_000)).toBe(70 * 60_000 + 3_600_000);
    // Clamped by TASK_MAX_TTL_MS.
    expect(grantedTtlMs(limits, undefined, 90_000_000)).toBe(86_400_000);
    // A ttl the client asked for is its own (clamped), whatever the tool declares.
    expect(grantedTtlMs(limits, 5000, 70 * 60_000)).toBe(5000);
    expect(grantedTtlMs(limits, 10 ** 12, 1)).toBe(86_400_000);
  });
});
