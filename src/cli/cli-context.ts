import { SchedulerRegistry } from '@nestjs/schedule';
import { AuditConfig } from '../audit/audit.config.js';
import { AuditRepository } from '../audit/audit.repository.js';
import { AuditTrail } from '../audit/audit-trail.service.js';
import { errorMessage } from '../common/error-message.js';
import type { DataSource } from 'typeorm';
import { PgBusService } from '../bus/pg-bus.service.js';
import type { LoadedConfig } from '../config/loaded-config.js';
import { BusConfig } from '../bus/bus.config.js';
import { DatabaseConfig } from '../database/database.config.js';
import { HealthConfig } from '../health/health.config.js';
import { InstancesConfig } from '../instances/instances.config.js';
import { JanitorConfig } from '../janitor/janitor.config.js';
import { TasksConfig } from '../tasks/tasks.config.js';
import { QuotasConfig } from '../quotas/quotas.config.js';
import type { CreationLimits } from '../tasks/store/creation-limits.js';
import { HealthService } from '../health/health.service.js';
import { InstancesAdminRepository } from '../instances/instances-admin.repository.js';
import { InstancesRepository } from '../instances/instances.repository.js';
import { InstancesService } from '../instances/instances.service.js';
import { ServiceInstance } from '../instances/service-instance.entity.js';
import { JanitorRepository } from '../janitor/janitor.repository.js';
import { JanitorService } from '../janitor/janitor.service.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { ApiKey } from '../principals/api-key.entity.js';
import { ApiKeysRepository } from '../principals/api-keys.repository.js';
import { ApiKeysService } from '../principals/api-keys.service.js';
import { SessionsAdminRepository } from '../sessions/sessions-admin.repository.js';
import { McpSession } from '../sessions/session.entity.js';
import { SessionsRepository } from '../sessions/sessions.repository.js';
import { TaskMetrics } from '../tasks/task-metrics.service.js';
import { announceSessionEnd } from '../sessions/session-end-announcer.js';
import { TaskAuditWriter } from '../tasks/store/task-audit-writer.js';
import { TaskChangePublisher } from '../tasks/store/task-change-publisher.js';
import { TaskCreationRepository } from '../tasks/store/task-creation.repository.js';
import { TaskRowWriter } from '../tasks/store/task-row-writer.js';
import { TaskTransactions } from '../tasks/store/task-transactions.js';
import { TasksAdminRepository } from '../tasks/store/tasks-admin.repository.js';
import { TasksRepository } from '../tasks/store/tasks.repository.js';
import { TASK_COUNTED_ELSEWHERE_CHANNEL } from '../tasks/registry/tasks.service.js';
import { TelemetryConfig } from '../telemetry/telemetry.config.js';
import type { CliIo } from './admin-commands.js';
import { TaskCommitGroups } from '../tasks/store/task-commit-groups.js';
import { ToolQueueRepository } from '../tasks/store/tool-queue.repository.js';

/** The server's own repositories and services, as the admin commands use them. */
export interface CliServices {
  config: LoadedConfig;
  tasks: TasksRepository;
  tasksAdmin: TasksAdminRepository;
  /** Task creation under the server's creation limits and lock (`tasks retry`). */
  creations: TaskCreationRepository;
  /** The creation limits the server applies (TASK_MAX_PER_OWNER, TASK_MAX_TOTAL, QUOTA_RETAINED_TASKS_PER_OWNER). */
  creationLimits: CreationLimits;
  sessions: SessionsRepository;
  /** Ends a session and waits until every running instance dropped it (see SessionsService.end). */
  endSession(id: string): Promise<void>;
  sessionsAdmin: SessionsAdminRepository;
  /**
   * Has a live server instance count a cancel made here in its mcp_tasks_finished_total (the CLI has no
   * /metrics): the instance that ran the task if it is alive, else the first live one. Returns its id, or
   * undefined when no instance is alive (then nobody counts it).
   */
  countCancelled(task: {
    toolName: string;
    createdAt: Date;
    instanceId: string | null;
  }): Promise<string | undefined>;
  instancesAdmin: InstancesAdminRepository;
  janitor: JanitorService;
  apiKeys: ApiKeysService;
  /** The audit trail, written under the operator actor the CLI runs every command with (cli.ts). */
  audit: AuditTrail;
  auditLog: AuditRepository;
  /**
   * An `operator.action` row for a command whose effect has no audit kind of its own (`janitor run-once`,
   * `migrations run`). A failure to write it is reported on stderr; the command's outcome stands.
   */
  recordOperatorAction(detail: Record<string, unknown>, io: CliIo): Promise<void>;
  /** Tools' queues: pause, resume, status (`queue`). */
  toolQueue: ToolQueueRepository;
}

/**
 * Builds the server's classes by hand instead of booting a Nest context: booting would run their lifecycle
 * hooks, which for a one-shot command are wrong (register this process as a service instance, open a LISTEN
 * connection, schedule the janitor, fail "orphaned" tasks). Constructed without those hooks, the same
 * classes give the CLI exactly the server's transactions, row locks, advisory locks and NOTIFYs.
 */
export function buildCliServices(ds: DataSource, config: LoadedConfig): CliServices {
  const busConfig = config.get(BusConfig);
  const databaseConfig = config.get(DatabaseConfig);
  const tasksConfig = config.get(TasksConfig);
  const instancesConfig = config.get(InstancesConfig);
  const metrics = new MetricsService(); // a throw-away registry: the CLI exposes no /metrics
  const scheduler = new SchedulerRegistry();
  // No instance id: the CLI is no server instance (its rows say detail.via = 'cli' and the operator).
  const audit = new AuditTrail(
    config.get(AuditConfig),
    ds,
    { instanceId: null },
    metrics,
    config.get(TelemetryConfig),
  );
  const instances = new InstancesService(
    new InstancesRepository(ds.getRepository(ServiceInstance)),
    scheduler,
    instancesConfig,
  );
  const health = new HealthService(ds, new LifecycleService(), config.get(HealthConfig), metrics);
  // Publishing needs no LISTEN connection: it is a pg_notify inside the caller's transaction.
  const bus = new PgBusService(busConfig, databaseConfig, ds, instances, metrics, health);
  const transactions = new TaskTransactions(ds, tasksConfig);
  // The CLI's task changes (cancel, retry) are audited like the server's, in their own transactions.
  const taskAudit = new TaskAuditWriter(audit);
  const publisher = new TaskChangePublisher(bus, taskAudit);
  const writer = new TaskRowWriter(transactions, publisher);
  const tasks = new TasksRepository(ds, transactions, writer, publisher);
  const tasksAdmin = new TasksAdminRepository(ds);
  // The task metrics listen to the commit groups (a throw-away registry here).
  const commitGroups = new TaskCommitGroups(tasksConfig);
  const creations = new TaskCreationRepository(ds, tasksConfig, transactions, publisher, commitGroups);
  const taskMetrics = new TaskMetrics(metrics, tasksAdmin, commitGroups);
  const sessions = new SessionsRepository(ds.getRepository(McpSession), ds, audit);
  return {
    config,
    tasks,
    tasksAdmin,
    creations,
    creationLimits: {
      maxPerOwner: tasksConfig.TASK_MAX_PER_OWNER,
      maxTotal: tasksConfig.TASK_MAX_TOTAL,
      maxRetainedPerOwner: config.get(QuotasConfig).QUOTA_RETAINED_TASKS_PER_OWNER,
    },
    sessions,
    endSession: async (id) => {
      if (!(await sessions.end(id, 'operator'))) return;
      const url = busConfig.DATABASE_LISTEN_URL ?? databaseConfig.DATABASE_URL;
      if (!url) return;
      await announceSessionEnd(
        url,
        id,
        await instances.otherLiveInstanceIds(),
        busConfig.BUS_HEARTBEAT_TIMEOUT_MS,
      );
    },
    sessionsAdmin: new SessionsAdminRepository(ds),
    countCancelled: async (task) => {
      const live = (await instances.otherLiveInstanceIds()).sort();
      const countedBy = task.instanceId && live.includes(task.instanceId) ? task.instanceId : live[0];
      if (!countedBy) return undefined;
      await bus.publish(TASK_COUNTED_ELSEWHERE_CHANNEL, {
        countedBy,
        toolName: task.toolName,
        createdAt: task.createdAt.toISOString(),
        status: 'cancelled',
      });
      return countedBy;
    },
    instancesAdmin: new InstancesAdminRepository(ds),
    janitor: new JanitorService(
      new JanitorRepository(ds, transactions, writer, taskAudit),
      config.get(JanitorConfig),
      config.get(AuditConfig),
      tasksConfig,
      instancesConfig,
      instances,
      taskMetrics,
      scheduler,
      metrics,
    ),
    apiKeys: new ApiKeysService(new ApiKeysRepository(ds.getRepository(ApiKey), audit)),
    audit,
    auditLog: new AuditRepository(ds),
    toolQueue: new ToolQueueRepository(ds, transactions, publisher),
    recordOperatorAction: async (detail, io) => {
      try {
        await audit.record(ds.manager, { kind: 'operator.action', detail });
      } catch (err) {
        io.err(`warning: the audit row of this action was not written: ${errorMessage(err)}`);
      }
    },
  };
}
