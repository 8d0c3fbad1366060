import { Module, type OnModuleInit } from '@nestjs/common';
import { registerErrorMapper } from '../common/error-mappers.js';
import { InstancesModule } from '../instances/instances.module.js';
import { ToolDispatchModule } from '../tool-dispatch/tool-dispatch.module.js';
import { FinishedTaskCache } from './finished-task-cache.js';
import { TaskAuditWriter } from './task-audit-writer.js';
import { TaskChangePublisher } from './task-change-publisher.js';
import { TaskCreationRepository } from './task-creation.repository.js';
import { TaskMetrics } from './task-metrics.service.js';
import { TaskOutcomeRecorder } from './task-outcome-recorder.js';
import { TaskOutcomesRepository } from './task-outcomes.repository.js';
import { TaskRowWriter } from './task-row-writer.js';
import { TaskRunnerService } from './task-runner.service.js';
import { TaskClaimer } from './task-claimer.service.js';
import { TaskQueueRepository } from './task-queue.repository.js';
import { TaskTransactions } from './task-transactions.js';
import { TaskWorkerRepository } from './task-worker.repository.js';
import { TasksAdminRepository } from './tasks-admin.repository.js';
import { TasksRepository } from './tasks.repository.js';
import { TasksConfig } from './tasks.config.js';
import { TasksService } from './tasks.service.js';
import { mapTaskError } from './tasks.error-mapper.js';
import { TaskError } from './tasks.errors.js';
import { UnresolvedLeases } from './unresolved-leases.js';
import { UnresolvedLeasesRepository } from './unresolved-leases.repository.js';

/**
 * What every task repository builds on: the transaction, the change publisher (and the audit rows it
 * writes), the locked row writes.
 */
const TASK_REPOSITORY_CORE = [TaskTransactions, TaskAuditWriter, TaskChangePublisher, TaskRowWriter];

/**
 * The task registry core. Exports the domain API (TasksService), the runner (which receives its TaskWork by
 * injection, and adopts escalated work) and the repository core for the janitor. How a tools/call runs (the
 * execution decision) belongs to the tasks protocol (`tasks/protocol/`), which builds on this module.
 */
@Module({
  // The tool registry: the task metrics create every tool's series at 0 at boot.
  imports: [InstancesModule, ToolDispatchModule],
  providers: [
    ...TASK_REPOSITORY_CORE,
    TasksRepository,
    TaskCreationRepository,
    TaskWorkerRepository,
    TaskOutcomesRepository,
    TasksAdminRepository,
    TaskQueueRepository,
    TaskMetrics,
    {
      // One per instance: filled by owners' reads and by the outcome recorder's commits, read by TasksService.
      provide: FinishedTaskCache,
      useFactory: (config: TasksConfig) =>
        new FinishedTaskCache(config.FINISHED_TASK_CACHE_MAX, config.FINISHED_TASK_CACHE_BYTES),
      inject: [TasksConfig],
    },
    TaskOutcomeRecorder,
    TaskRunnerService,
    TaskClaimer,
    UnresolvedLeasesRepository,
    UnresolvedLeases,
    TasksService,
  ],
  exports: [
    ...TASK_REPOSITORY_CORE,
    TasksRepository,
    // The operator console's reads and its redrive (admin/).
    TasksAdminRepository,
    TaskCreationRepository,
    TaskMetrics,
    TaskRunnerService,
    TaskClaimer,
    TasksService,
  ],
})
export class TasksModule implements OnModuleInit {
  onModuleInit(): void {
    registerErrorMapper(TaskError, mapTaskError);
  }
}
