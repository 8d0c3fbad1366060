import { DomainError } from '../common/domain-error.js';
import type { TaskSnapshot } from './task.types.js';

/**
 * Domain errors of the task registry. The protocol layer maps each code to its era's wire error once
 * (for instance TASK_NOT_FOUND → -32602 "Task not found" in both eras); nothing here knows JSON-RPC.
 */
export enum TaskErrorCode {
  /** Unknown id, an id owned by someone else, or a task already deleted: deliberately one answer for all. */
  TASK_NOT_FOUND = 'TASK_NOT_FOUND',
  /** The task is completed, failed or cancelled, so the operation cannot apply (`task` carries it). */
  TASK_TERMINAL = 'TASK_TERMINAL',
  /** A configured limit refused the operation; the message names the limit. */
  LIMIT_EXCEEDED = 'LIMIT_EXCEEDED',
  /** A tasks/list cursor that this server did not produce. */
  INVALID_CURSOR = 'INVALID_CURSOR',
  /** A task row could not be locked within TASK_LOCK_TIMEOUT_MS. */
  TASK_BUSY = 'TASK_BUSY',
  /** Invalid arguments from the calling layer (a programming error there, not a client error). */
  INVALID_ARGUMENT = 'INVALID_ARGUMENT',
  /** An Idempotency-Key this owner already used with another tool or other arguments (`idempotencyKey`). */
  IDEMPOTENCY_CONFLICT = 'IDEMPOTENCY_CONFLICT',
}

export class TaskError extends DomainError<TaskErrorCode> {
  constructor(
    code: TaskErrorCode,
    message: string,
    /** The task as it is now, for TASK_TERMINAL (the legacy era quotes its status; the modern era acks). */
    readonly task?: TaskSnapshot,
    /** For LIMIT_EXCEEDED by a per-owner quota: which one, so the edge can name it and count it. */
    readonly quota?: { quota: string; limit: number; setting: string },
    /** For IDEMPOTENCY_CONFLICT: the key, which the edge names in the error's data. */
    readonly idempotencyKey?: string,
  ) {
    super(code, message);
  }

  static idempotencyConflict(key: string): TaskError {
    return new TaskError(
      TaskErrorCode.IDEMPOTENCY_CONFLICT,
      `Idempotency-Key '${key}' was already used with another tool or other arguments; ` +
        'use a new key for a different call',
      undefined,
      undefined,
      key,
    );
  }

  static notFound(): TaskError {
    return new TaskError(TaskErrorCode.TASK_NOT_FOUND, 'Task not found');
  }
}
