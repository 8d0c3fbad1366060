import { Injectable, Logger } from '@nestjs/common';
import { asActor } from '../audit/audit-context.js';
import type { AuditActor } from '../audit/audit.types.js';
import type { Principal } from '../principals/principal.js';
import { QuotasConfig } from '../quotas/quotas.config.js';
import { SessionsService } from '../sessions/sessions.service.js';
import { isLive, isTerminal } from '../tasks/task-state.js';
import { redriveOf } from '../tasks/execution/task-redrive.js';
import { TaskCreationRepository, type NewTask } from '../tasks/store/task-creation.repository.js';
import { TasksAdminRepository } from '../tasks/store/tasks-admin.repository.js';
import { TasksConfig } from '../tasks/tasks.config.js';
import { TaskError, TaskErrorCode } from '../tasks/tasks.errors.js';
import { TaskMetrics } from '../tasks/task-metrics.service.js';
import { TasksService } from '../tasks/registry/tasks.service.js';

/** What an action did, as the flash message after the redirect names it (flash codes, see admin-flash.ts). */
export type ActionOutcome =
  | {
      done:
        | 'cancelled'
        | 'already-finished'
        | 'busy'
        | 'not-finished'
        | 'limit'
        | 'ended'
        | 'already-ended'
        | 'stale-form';
    }
  | { done: 'redriven'; newTaskId: string }
  | { done: 'not-found' };

const CANCEL_MESSAGE = 'Cancelled by an operator';
/** The Idempotency-Key of a console redrive: the prefix, then the submission id its form carried. */
const REDRIVE_KEY_PREFIX = 'console-redrive:';

/**
 * The console's actions, through the services the server (and the CLI) use, under the operator as actor
 * (`asActor`, via 'console'), so each audit row they cause names the operator:
 * - cancel: TasksService.cancel with the task's owner: the row lock, the generation bump that fences off the
 *   worker, the change notification (the owner's client sees `cancelled`, the running instance aborts);
 * - redrive: what `tasks retry` does: a new queued task from the finished one, under the creation limits;
 * - end session: SessionsService.end, as DELETE /mcp does (every instance drops it).
 */
@Injectable()
export class AdminActions {
  private readonly logger = new Logger(AdminActions.name);

  constructor(
    private readonly tasks: TasksService,
    private readonly tasksAdmin: TasksAdminRepository,
    private readonly creations: TaskCreationRepository,
    private readonly sessions: SessionsService,
    private readonly tasksConfig: TasksConfig,
    private readonly quotasConfig: QuotasConfig,
    private readonly metrics: TaskMetrics,
  ) {}

  async cancelTask(operator: Principal, id: string): Promise<ActionOutcome> {
    const task = await this.tasksAdmin.findById(id);
    if (!task) return { done: 'not-found' };
    if (!isLive(task.status)) return { done: 'already-finished' };
    try {
      await asActor(operatorOf(operator), () => this.tasks.cancel(task.ownerId, id, CANCEL_MESSAGE));
    } catch (err) {
      return this.outcomeOf(err);
    }
    this.logger.log(`task ${id} cancelled by operator ${operator.id}`);
    return { done: 'cancelled' };
  }

  /**
   * Redrives a finished task once per submitted form: `submission` (rendered into the form) becomes the new
   * task's Idempotency-Key under the owner, so a second POST of the same form (a double click, two tabs, a
   * resent request, on any instance) finds the task the first one created instead of creating another; the
   * database's unique key decides between concurrent ones.
   */
  async redriveTask(operator: Principal, id: string, submission: string): Promise<ActionOutcome> {
    const old = await this.tasksAdmin.findById(id);
    if (!old) return { done: 'not-found' };
    if (!isTerminal(old.status)) return { done: 'not-finished' };
    const task: NewTask = {
      ...redriveOf(old, this.tasksConfig.TASK_LEASE_MS),
      idempotencyKey: `${REDRIVE_KEY_PREFIX}${submission}`,
      requestHash: `redrive of ${old.id}`,
    };
    try {
      const {
        created,
        task: made,
        requestHash,
      } = await asActor(operatorOf(operator), () =>
        this.creations.insertKeyed(task, {
          maxPerOwner: this.tasksConfig.TASK_MAX_PER_OWNER,
          maxTotal: this.tasksConfig.TASK_MAX_TOTAL,
          maxRetainedPerOwner: this.quotasConfig.QUOTA_RETAINED_TASKS_PER_OWNER,
        }),
      );
      // The same submission id posted for another task: not a form this console rendered for it.
      if (requestHash !== task.requestHash) return { done: 'stale-form' };
      if (created) {
        this.metrics.taskCreated(made.toolName, 'redriven');
        this.logger.log(`task ${id} redriven as ${made.id} by operator ${operator.id}`);
      }
      return { done: 'redriven', newTaskId: made.id };
    } catch (err) {
      return this.outcomeOf(err);
    }
  }

  async endSession(operator: Principal, id: string): Promise<ActionOutcome> {
    const session = await this.sessions.find(id);
    if (!session) return { done: 'not-found' };
    if (session.endedAt) return { done: 'already-ended' };
    await asActor(operatorOf(operator), () => this.sessions.end(session, 'operator'));
    this.logger.log(`session ${id} ended by operator ${operator.id}`);
    return { done: 'ended' };
  }

  /** The task errors an action can meet in a race (someone else finished or locked the task meanwhile). */
  private outcomeOf(err: unknown): ActionOutcome {
    if (!(err instanceof TaskError)) throw err;
    switch (err.code) {
      case TaskErrorCode.TASK_TERMINAL:
        return { done: 'already-finished' };
      case TaskErrorCode.TASK_NOT_FOUND:
        return { done: 'not-found' };
      case TaskErrorCode.TASK_BUSY:
        return { done: 'busy' };
      case TaskErrorCode.LIMIT_EXCEEDED:
        this.logger.warn(`redrive refused: ${err.message}`);
        return { done: 'limit' };
      case TaskErrorCode.INVALID_ARGUMENT:
      case TaskErrorCode.INVALID_CURSOR:
      case TaskErrorCode.IDEMPOTENCY_CONFLICT:
        throw err;
    }
  }
}

function operatorOf(p: Principal): AuditActor {
  return { kind: 'operator', principal: p.id, via: 'console' };
}
