import type { QuotaName } from '../../quotas/quota.errors.js';
import type { QuotaService } from '../../quotas/quota.service.js';
import type { McpRequestContext } from '../../protocol/request-context.js';
import { storedPrincipal } from '../../principals/principal.js';
import type { ToolDescriptor } from '../../tool-dispatch/tool-dispatch.types.js';
import type { CreateTaskInput } from '../execution/task-creation.service.js';
import { TaskError } from '../tasks.errors.js';
import type { Params } from './task-params.js';

/*
 * What the tools/call of both eras share when a call becomes a task (legacy/legacy-tools-call.ts,
 * modern/modern-tools-call.ts): the task's input, and the quota error a refused creation becomes.
 */

/**
 * The task a call of `toolName` creates, owned by the request's principal: the request params as stored, and
 * what the tool's durability declaration copies onto it (resumable, attempts, longest run).
 */
export function taskInput(
  ctx: McpRequestContext,
  toolName: string,
  requestParams: Params,
  fields: Pick<CreateTaskInput, 'era' | 'mode'> & Partial<CreateTaskInput>,
): CreateTaskInput {
  const d: ToolDescriptor['durability'] | undefined = ctx.tool?.descriptor?.durability;
  return {
    ownerId: ctx.principal.id,
    toolName,
    requestParams,
    requestedTtlMs: null,
    principal: storedPrincipal(ctx.principal),
    resumable: d?.resumable ?? false,
    maxAttempts: d?.maxAttempts ?? 1,
    maxRunMs: d?.maxRunMs ?? null,
    ...fields,
  };
}

/** A per-owner quota the registry enforces in its transaction becomes a counted quota error. */
export async function countedQuota<T>(quotas: QuotaService, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof TaskError && err.quota) {
      const q = err.quota;
      throw quotas.refuse(q.quota as QuotaName, err.message, q.limit, q.setting);
    }
    throw err;
  }
}
