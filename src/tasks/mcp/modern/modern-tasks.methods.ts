import { isJsonObject } from '../../../common/json.js';
import { Injectable, type OnModuleInit } from '@nestjs/common';
import { MethodRegistry } from '../../../protocol/method-registry.js';
import { ProtocolError } from '../../../protocol/protocol.errors.js';
import type { McpRequestContext } from '../../../protocol/request-context.js';
import { QuotaService } from '../../../quotas/quota.service.js';
import { TaskError, TaskErrorCode } from '../../tasks.errors.js';
import { TasksService } from '../../registry/tasks.service.js';
import { requireExtension, taskIdOf, type Params } from '../task-params.js';
import { TaskToolRunner } from '../task-tool-runner.service.js';
import { modernDetailedTask } from '../task-wire.js';

/** tasks/get, tasks/update and tasks/cancel of the modern era (2026-07-28, the tasks extension). */
@Injectable()
export class ModernTasksMethods implements OnModuleInit {
  constructor(
    private readonly tasks: TasksService,
    private readonly toolRunner: TaskToolRunner,
    private readonly methods: MethodRegistry,
    private readonly quotas: QuotaService,
  ) {}

  onModuleInit(): void {
    const modern = { eras: ['modern'] } as const;
    this.methods.register(
      'tasks/get',
      async (p, ctx) => {
        requireExtension(ctx.clientCapabilities);
        return modernDetailedTask(await this.tasks.get(ctx.principal.id, taskIdOf(p)));
      },
      modern,
    );
    this.methods.register('tasks/update', (p, ctx) => this.update(p, ctx), modern);
    this.methods.register('tasks/cancel', (p, ctx) => this.cancel(p, ctx), modern);
  }

  private async update(p: Params, ctx: McpRequestContext): Promise<Record<string, unknown>> {
    requireExtension(ctx.clientCapabilities);
    const taskId = taskIdOf(p);
    if (!isJsonObject(p.inputResponses))
      throw ProtocolError.invalidParams('params.inputResponses must be an object');
    // Each update is bounded; TASK_MAX_INPUT_ROUNDS bounds how many a task stores.
    this.quotas.checkBytes('task_input_bytes', p.inputResponses);
    // The caller's principal is remembered only once the registry accepted it as the owner's, for the run
    // this update resumes: nothing is keyed by a client-chosen id before that.
    await this.tasks.submitInput(ctx.principal.id, taskId, p.inputResponses, (task) =>
      this.toolRunner.rememberPrincipal(task.id, ctx.principal),
    );
    return {};
  }

  private async cancel(p: Params, ctx: McpRequestContext): Promise<Record<string, unknown>> {
    requireExtension(ctx.clientCapabilities);
    try {
      await this.tasks.cancel(ctx.principal.id, taskIdOf(p));
    } catch (err) {
      // Cancelling a finished task is acknowledged like any other: cancellation is cooperative.
      if (!(err instanceof TaskError && err.code === TaskErrorCode.TASK_TERMINAL)) throw err;
    }
    return {};
  }
}
