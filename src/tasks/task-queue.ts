/*
 * The claim queue's shared vocabulary. A task is *queued* while it is `working` with no instance
 * (instance_id NULL) and `available_at` set: any instance with free capacity may claim it from then on
 * (FOR UPDATE SKIP LOCKED on task_claim_idx), which leases it to that instance and bumps its generation, so
 * every earlier run is fenced out. Whatever makes a task claimable — a creation no local worker took, a retry
 * whose backoff will pass, a hand-over at drain, a rescue, a redrive — also notifies TASK_QUEUE_CHANNEL in
 * its transaction, so claimers wake at commit instead of waiting for their next poll.
 */

/** Bus channel of "a task is (or will be) claimable": payload `{ taskId, availableAtMs }` (epoch ms). */
export const TASK_QUEUE_CHANNEL = 'mcp_task_queued';

/** The statusMessage of a task waiting for a worker with free capacity. */
export const QUEUED_MESSAGE = 'Queued: waiting for a worker with free capacity';

/** Bus channel of "a tool's queue was paused or resumed": payload `{ tool, paused }`. */
export const TOOL_QUEUE_CHANNEL = 'mcp_tool_queue';

/** The statusMessage of a task waiting because its tool's queue is paused (it always contains "paused"). */
export function pausedMessage(tool: string): string {
  return `Queued: ${tool} is paused by an operator; it runs when the tool is resumed`;
}

/** What a queue notification carries. */
export interface QueuedNotice {
  taskId: string;
  /** When the task becomes claimable (epoch ms, database clock). */
  availableAtMs: number;
  /** How many tasks became claimable at once (a limit letting its waiting tasks go); 1 when absent. */
  count: number;
}

/** Reads a TASK_QUEUE_CHANNEL payload; null when it is not one. */
export function queuedNotice(payload: Record<string, unknown>): QueuedNotice | null {
  const { taskId, availableAtMs, count } = payload;
  if (typeof taskId !== 'string' || typeof availableAtMs !== 'number' || !Number.isFinite(availableAtMs)) {
    return null;
  }
  const n = typeof count === 'number' && Number.isInteger(count) && count > 0 ? count : 1;
  return { taskId, availableAtMs, count: n };
}
