import { modernCompleteResult } from '../../protocol/modern-result.js';
import type { TaskSnapshot } from '../task.types.js';

/**
 * A task in each era's vocabulary (https://modelcontextprotocol.io/specification/2025-11-25/basic/utilities/tasks#data-types and
 * https://modelcontextprotocol.io/extensions/tasks/overview). The legacy era (2025-11-25) nests the task and speaks
 * `ttl`/`pollInterval`; the modern era (2026-07-28) is flat and speaks `ttlMs`/`pollIntervalMs`, and its detailed form
 * inlines the result, the error or the outstanding input requests.
 */
function base(t: TaskSnapshot): Record<string, unknown> {
  const out: Record<string, unknown> = {
    taskId: t.id,
    status: t.status,
    createdAt: t.createdAt.toISOString(),
    lastUpdatedAt: t.lastUpdatedAt.toISOString(),
  };
  if (t.statusMessage) out.statusMessage = t.statusMessage;
  return out;
}

export function legacyTask(t: TaskSnapshot): Record<string, unknown> {
  return { ...base(t), ttl: t.ttlMs, pollInterval: t.pollIntervalMs };
}

export function modernTask(t: TaskSnapshot): Record<string, unknown> {
  return { ...base(t), ttlMs: t.ttlMs, pollIntervalMs: t.pollIntervalMs };
}

/** The flat CreateTaskResult of the extension: nothing but the task's own fields. */
export function modernCreateTaskResult(t: TaskSnapshot): Record<string, unknown> {
  return { resultType: 'task', ...modernTask(t) };
}

/**
 * DetailedTask: what tasks/get and notifications/tasks carry in the modern era. A completed task's `result` is the
 * call's answer as the era renders it inline, `resultType` included.
 */
export function modernDetailedTask(t: TaskSnapshot): Record<string, unknown> {
  const out = modernTask(t);
  if (t.status === 'completed' && t.result) out.result = modernCompleteResult(t.result);
  if (t.status === 'failed' && t.error) out.error = t.error;
  if (t.status === 'input_required') out.inputRequests = t.inputRequests;
  return out;
}
