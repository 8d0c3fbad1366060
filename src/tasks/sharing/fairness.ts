import type { TasksConfig } from '../tasks.config.js';

/**
 * Whose share of the task workers a new task runs on (TASK_FAIR_SHARE): its owner's principal id
 * (`principal`), the tenant its credential names (`tenant`; a caller without one is its own share), or one
 * share for everyone (`off`: the key '' makes the fair claim first come, first served).
 */
export function fairnessKeyOf(
  mode: TasksConfig['TASK_FAIR_SHARE'],
  ownerId: string,
  principal: Record<string, unknown> | null | undefined,
): string {
  if (mode === 'off') return '';
  const tenant = principal?.tenant;
  // Prefixed, so a tenant named like some principal id never shares that principal's share.
  if (mode === 'tenant' && typeof tenant === 'string' && tenant !== '') return `tenant:${tenant}`;
  return ownerId;
}
