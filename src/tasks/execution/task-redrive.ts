import { captureTraceContext } from '../../telemetry/trace-context.js';
import { newTaskId } from '../task-ids.js';
import type { NewTask } from '../store/task-creation.repository.js';
import { QUEUED_MESSAGE } from '../task-queue.js';
import { isTerminal } from '../task-state.js';
import type { Task } from '../task.entity.js';

/**
 * Redrive (`tasks retry`): terminal states stay final, so a finished task is run again as a NEW
 * task — same tool, request params, owner, era, session, principal and durability — linked to the old one
 * by `redriven_from`. It is inserted queued (no instance): whichever server's claimer has room runs it,
 * as the owner (the stored principal). Its ttl is the old task's granted ttl, counted from now; its trace
 * context is the redriving process's own (none when untraced), never the old task's; it has no
 * Idempotency-Key of its own (the old task keeps its key for as long as it exists): the console adds one per
 * submitted form (AdminActions.redriveTask).
 */
export function redriveOf(old: Task, leaseMs: number): NewTask {
  if (!isTerminal(old.status))
    throw new Error(`task ${old.id} is ${old.status}: only a finished task is redriven`);
  return {
    id: newTaskId(),
    ownerId: old.ownerId,
    sessionId: old.sessionId,
    era: old.era,
    toolName: old.toolName,
    ttlMs: old.ttlMs,
    pollIntervalMs: old.pollIntervalMs,
    requestParams: old.requestParams,
    instanceId: null,
    leaseMs,
    statusMessage: QUEUED_MESSAGE,
    traceContext: captureTraceContext(),
    principal: old.principal,
    resumable: old.resumable,
    maxAttempts: old.maxAttempts,
    redrivenFrom: old.id,
    // The same share and limit key as the old task: the claim applies its tool's pause and limits.
    fairnessKey: old.fairnessKey || old.ownerId,
    limitKey: old.limitKey,
  };
}
