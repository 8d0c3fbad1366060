import { TaskError, TaskErrorCode } from '../tasks.errors.js';

export interface CreationLimits {
  maxPerOwner: number;
  maxTotal: number;
  /** Finished (completed, failed, cancelled) tasks one owner may keep. */
  maxRetainedPerOwner: number;
}

/** A limit a creation can hit. */
export type CreationLimit = 'owner_live' | 'owner_retained' | 'total_live';

/** The SQLSTATEs task_check_creation_limits raises (migration TaskUsageCounters), by the limit hit. */
export const LIMIT_SQLSTATES: Record<string, CreationLimit> = {
  MCPLO: 'owner_live',
  MCPLR: 'owner_retained',
  MCPLT: 'total_live',
};

/** The error a creation refused at one of its limits answers with. */
export function limitRefusal(limit: CreationLimit, limits: CreationLimits): TaskError {
  switch (limit) {
    case 'owner_live':
      return new TaskError(
        TaskErrorCode.LIMIT_EXCEEDED,
        `Too many live tasks for this caller (TASK_MAX_PER_OWNER = ${limits.maxPerOwner})`,
      );
    case 'owner_retained':
      return new TaskError(
        TaskErrorCode.LIMIT_EXCEEDED,
        `Too many finished tasks kept for this caller (QUOTA_RETAINED_TASKS_PER_OWNER = ${limits.maxRetainedPerOwner}); they are deleted as they expire`,
        undefined,
        {
          quota: 'retained_tasks',
          limit: limits.maxRetainedPerOwner,
          setting: 'QUOTA_RETAINED_TASKS_PER_OWNER',
        },
      );
    case 'total_live':
      return new TaskError(
        TaskErrorCode.LIMIT_EXCEEDED,
        `Too many live tasks on this server (TASK_MAX_TOTAL = ${limits.maxTotal})`,
      );
  }
}

/** Of two sets of limits, the strictest of each (a commit group's owner checks the strictest it carries). */
export function strictest(a: CreationLimits, b: CreationLimits): CreationLimits {
  return {
    maxPerOwner: Math.min(a.maxPerOwner, b.maxPerOwner),
    maxTotal: Math.min(a.maxTotal, b.maxTotal),
    maxRetainedPerOwner: Math.min(a.maxRetainedPerOwner, b.maxRetainedPerOwner),
  };
}

/** limit + 1, within PostgreSQL's int (a limit that large never binds anyway). */
export function oneMore(limit: number): number {
  return Math.min(limit + 1, 2_147_483_647);
}
