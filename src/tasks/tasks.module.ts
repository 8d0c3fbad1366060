import { Module } from '@nestjs/common';
import { InstancesModule } from '../instances/instances.module.js';
import { ToolDispatchModule } from '../tool-dispatch/tool-dispatch.module.js';
import { FinishedTaskCache } from './registry/finished-task-cache.js';
import { TaskAuditWriter } from './store/task-audit-writer.js';
import { TaskChangePublisher } from './store/task-change-publisher.js';
import { TaskCreationRepository } from './store/task-creation.repository.js';
import { TaskMetrics } from './task-metrics.service.js';
import { TaskOutcomeRecorder } from './execution/task-outcome-recorder.js';
import { TaskOutcomesRepository } from './store/task-outcomes.repository.js';
import { TaskRowWriter } from './store/task-row-writer.js';
import { TaskRunnerService } from './execution/task-runner.service.js';
import { TaskClaimer } from './execution/task-claimer.service.js';
import { TaskQueueRepository } from './store/task-queue.repository.js';
import { TaskCommitGroups } from './store/task-commit-groups.js';
import { TaskTransactions } from './store/task-transactions.js';
import { TaskWorkerRepository } from './store/task-worker.repository.js';
import { TasksAdminRepository } from './store/tasks-admin.repository.js';
import { TasksRepository } from './store/tasks.repository.js';
import { TasksConfig } from './tasks.config.js';
import { ToolGates } from './sharing/tool-gates.service.js';
import { QueueControl } from './sharing/queue-control.js';
import { QueueSharingMetrics } from './sharing/queue-sharing.metrics.js';
import { AuditTrail } from '../audit/audit-trail.service.js';
import { ToolRegistry } from '../tool-dispatch/tool-registry.service.js';
import { ToolQueueRepository } from './store/tool-queue.repository.js';
import { TasksService } from './registry/tasks.service.js';
import { TaskCreationService } from './execution/task-creation.service.js';
import { UnresolvedLeases } from './execution/unresolved-leases.js';
import { UnresolvedLeasesRepository } from './store/unresolved-leases.repository.js';

/**
 * What every task repository builds on: the transaction, the change publisher (and the audit rows it
 * writes), the locked row writes.
 */
const TASK_REPOSITORY_CORE = [
  TaskTransactions,
  TaskAuditWriter,
  TaskChangePublisher,
  TaskRowWriter,
  TaskCommitGroups,
];

/**
 * The task registry core. Exports the domain API (TasksService for owners, TaskCreationService for creation),
 * the runner (which receives its TaskWork by injection, and adopts escalated work) and the repository core
 * for the janitor. How a tools/call runs (the execution decision) belongs to the MCP face of tasks
 * (`tasks/mcp/`), which builds on this module.
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
    ToolQueueRepository,
    ToolGates,
    QueueSharingMetrics,
    {
      // Pause, resume and status of tools' queues, against this server's tool catalog (the console's).
      provide: QueueControl,
      useFactory: (repo: ToolQueueRepository, audit: AuditTrail, tools: ToolRegistry) =>
        new QueueControl(repo, audit, () => tools.listTools()),
      inject: [ToolQueueRepository, AuditTrail, ToolRegistry],
    },
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
    TaskCreationService,
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
    ToolGates,
    QueueControl,
    // The queue's pause, resume and status (tasks/sharing/, the CLI and the console).
    ToolQueueRepository,
    TasksService,
    TaskCreationService,
  ],
})
export class TasksModule {}
