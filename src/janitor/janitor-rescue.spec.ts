import { planRescue, type LostRun } from './janitor-rescue.js';

const LOST = 'worker lost: the server running this task stopped';
const run = (extra: Partial<LostRun>): LostRun => ({
  id: 't1',
  status: 'working',
  resumable: true,
  attempt: 1,
  failedAttempts: 0,
  maxAttempts: 3,
  ...extra,
});

describe('planRescue', () => {
  it('re-queues a working resumable task while the lost run leaves budget', () => {
    expect(planRescue(run({ attempt: 4, failedAttempts: 1 }))).toEqual({
      id: 't1',
      requeue: true,
      statusMessage: 'Rescued: the worker of attempt 4 was lost; attempt 5 waits for a worker',
      lastError: { code: -32603, message: LOST },
    });
  });

  it('fails a resumable task whose lost run was its last failed attempt, naming the failed runs', () => {
    // Two hand-overs (attempt 5) and two failures before: the lost run is the third failure of three.
    const message = `Failed after 3 attempts: ${LOST}`;
    expect(planRescue(run({ attempt: 5, failedAttempts: 2 }))).toEqual({
      id: 't1',
      requeue: false,
      statusMessage: message,
      error: { code: -32603, message },
      lastError: { code: -32603, message: LOST },
      countFailure: true,
    });
  });

  it('fails a plain task, and a resumable one waiting on legacy input, "worker lost" as before', () => {
    const plain = {
      id: 't1',
      requeue: false,
      statusMessage: LOST,
      error: { code: -32603, message: LOST },
      lastError: null,
      countFailure: false,
    };
    expect(planRescue(run({ resumable: false, maxAttempts: 1 }))).toEqual(plain);
    expect(planRescue(run({ resumable: false, maxAttempts: 5 }))).toEqual(plain);
    expect(planRescue(run({ status: 'input_required' }))).toEqual(plain);
  });
});
