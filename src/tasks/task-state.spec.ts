import { canTransition, isLive, isTerminal, TASK_STATUSES, type TaskStatus } from './task-state.js';

describe('task state machine', () => {
  const allowed: Record<TaskStatus, TaskStatus[]> = {
    working: ['input_required', 'completed', 'failed', 'cancelled'],
    input_required: ['working', 'completed', 'failed', 'cancelled'],
    completed: [],
    failed: [],
    cancelled: [],
  };

  const table = TASK_STATUSES.flatMap((from) =>
    TASK_STATUSES.map((to) => [from, to, allowed[from].includes(to)] as const),
  );

  it.each(table)('%s -> %s allowed: %s', (from, to, expected) => {
    expect(canTransition(from, to)).toBe(expected);
  });

  it('has exactly three terminal states, which never change again', () => {
    expect(TASK_STATUSES.filter(isTerminal)).toEqual(['completed', 'failed', 'cancelled']);
    for (const t of TASK_STATUSES.filter(isTerminal)) {
      expect(TASK_STATUSES.filter((to) => canTransition(t, to))).toEqual([]);
    }
  });

  it('lets a parked task be cancelled or expire (a bug of a system we learn from)', () => {
    expect(isLive('input_required')).toBe(true);
    expect(canTransition('input_required', 'cancelled')).toBe(true);
    expect(canTransition('input_required', 'failed')).toBe(true);
  });

  it('never allows a self-transition', () => {
    for (const s of TASK_STATUSES) expect(canTransition(s, s)).toBe(false);
  });
});
