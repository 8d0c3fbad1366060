import { Module, type OnModuleInit } from '@nestjs/common';
import { registerErrorMapper } from '../common/error-mappers.js';
import { InstancesModule } from '../instances/instances.module.js';
import { ToolDispatchModule } from '../tool-dispatch/tool-dispatch.module.js';
import { TaskMetrics } from './task-metrics.service.js';
import { TaskRunnerService } from './task-runner.service.js';
import { TasksRepository } from './tasks.repository.js';
import { TasksService } from './tasks.service.js';
import { mapTaskError } from './tasks.error-mapper.js';
import { TaskError } from './tasks.errors.js';

/**
 * The task registry. Exports the domain API (TasksService, including `decide` for the execution decision),
 * the runner (which receives its TaskWork by injection, and adopts escalated work) and the repository for the janitor.
 * The pure decision function itself is `decideExecution` in execution-decision.ts.
 */
@Module({
  // The tool registry: the task metrics create every tool's series at 0 at boot.
  imports: [InstancesModule, ToolDispatchModule],
  providers: [TasksRepository, TaskMetrics, TaskRunnerService, TasksService],
  exports: [TasksRepository, TaskMetrics, TaskRunnerService, TasksService],
})
export class TasksModule implements OnModuleInit {
  onModuleInit(): void {
    registerErrorMapper(TaskError, mapTaskError);
  }
}
