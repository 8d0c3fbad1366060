import { errorMessage } from '../../../common/error-message.js';
import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { MethodRegistry } from '../../../protocol/method-registry.js';
import { ProtocolError } from '../../../protocol/protocol.errors.js';
import type { Principal } from '../../../principals/principal.js';
import { startTaskSpan } from '../../../telemetry/task-spans.js';
import { TasksService } from '../../registry/tasks.service.js';
import { REQUIRED_EXTENSION, extensionDeclared, type Params } from '../task-params.js';
import { TaskSubscription } from './task-subscription.js';
import { modernDetailedTask } from '../task-wire.js';

/**
 * Modern era (2026-07-28): subscriptions/listen with notifications.taskIds delivers notifications/tasks for
 * the caller's own tasks, from any instance.
 */
@Injectable()
export class TaskListenFilter implements OnModuleInit {
  private readonly logger = new Logger(TaskListenFilter.name);

  constructor(
    private readonly tasks: TasksService,
    private readonly methods: MethodRegistry,
  ) {}

  onModuleInit(): void {
    this.methods.registerListenFilter('taskIds', (filter, ctx, send) => this.listen(filter, ctx, send));
  }

  private async listen(
    filter: unknown,
    ctx: { principal: Principal; clientCapabilities: Params; signal: AbortSignal },
    send: (method: string, params: Params) => void,
  ): Promise<unknown> {
    if (!Array.isArray(filter) || filter.some((id) => typeof id !== 'string')) {
      throw ProtocolError.invalidParams(
        'params.notifications.taskIds must be an array of strings',
        undefined,
        400,
      );
    }
    if (!extensionDeclared(ctx.clientCapabilities)) throw ProtocolError.missingCapability(REQUIRED_EXTENSION);
    const ownerId = ctx.principal.id;
    const ids = [...new Set(filter as string[])];
    // Listen before reading the baseline: a change committed in between is in the baseline or wakes it.
    // (No await until `subscription` exists, so no handler can run before it does.)
    const offChange = this.tasks.onTaskChanged((change) => {
      if (change.ownerId === ownerId) subscription.wake(change.taskId);
    });
    const offResync = this.tasks.onResync(() => subscription.wake());
    const baseline = this.tasks.versioned(ownerId, ids);
    const subscription = new TaskSubscription(
      (wanted) => this.tasks.versioned(ownerId, wanted),
      (task) => {
        const span = startTaskSpan('notifications/tasks', task, {
          'mcp.method.name': 'notifications/tasks',
          'mcp.task.status': task.status,
        });
        send('notifications/tasks', modernDetailedTask(task));
        span.end();
      },
      (err) => this.logger.warn(`task subscription read failed: ${errorMessage(err)}`),
      baseline,
    );
    const stop = (): void => {
      offChange();
      offResync();
      subscription.close();
    };
    ctx.signal.addEventListener('abort', stop, { once: true });
    let owned: Set<string>;
    try {
      owned = new Set((await baseline).map((r) => r.task.id));
    } catch (err) {
      stop();
      throw err;
    }
    return ids.filter((id) => owned.has(id));
  }
}
