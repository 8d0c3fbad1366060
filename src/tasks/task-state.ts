/**
 * The task state machine, shared by every era. A task starts `working`; the three terminal states never
 * change again. `input_required` can reach every terminal state directly (cancel, expiry, a worker that
 * gives up), which one of the systems we learn from got wrong: its parked tasks could be neither cancelled
 * nor expired.
 */
export const TASK_STATUSES = ['working', 'input_required', 'completed', 'failed', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

export const LIVE_STATUSES = ['working', 'input_required'] as const satisfies readonly TaskStatus[];
export type LiveStatus = (typeof LIVE_STATUSES)[number];

export const TERMINAL_STATUSES = [
  'completed',
  'failed',
  'cancelled',
] as const satisfies readonly TaskStatus[];
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

const ALLOWED: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = {
  working: ['input_required', 'completed', 'failed', 'cancelled'],
  input_required: ['working', 'completed', 'failed', 'cancelled'],
  completed: [],
  failed: [],
  cancelled: [],
};

export function isTerminal(status: TaskStatus): status is TerminalStatus {
  return ALLOWED[status].length === 0;
}

export function isLive(status: TaskStatus): status is LiveStatus {
  return !isTerminal(status);
}

export function canTransition(from: TaskStatus, to: TaskStatus): boolean {
  return ALLOWED[from].includes(to);
}

export function isTaskStatus(value: unknown): value is TaskStatus {
  return typeof value === 'string' && (TASK_STATUSES as readonly string[]).includes(value);
}
