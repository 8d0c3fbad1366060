import type { DatabaseSchema } from './database/typeorm-options.js';
import { AuditEventRow } from './audit/audit-event.entity.js';
import { ServiceInstance } from './instances/service-instance.entity.js';
import { ApiKey } from './principals/api-key.entity.js';
import { PrincipalRecord } from './principals/principal-record.entity.js';
import { ClientResponse } from './sessions/client-response.entity.js';
import { McpSession } from './sessions/session.entity.js';
import { SseEvent } from './sessions/sse-event.entity.js';
import { SseStream } from './sessions/sse-stream.entity.js';
import { Task } from './tasks/task.entity.js';
import { ToolQueueRow, ToolRunStart } from './tasks/sharing/tool-queue.entity.js';
import { CreateServiceInstance1764460000000 } from '../migrations/1764460000000-create-service-instance.js';
import { CreateSessions1764460100000 } from '../migrations/1764460100000-create-sessions.js';
import { CreatePrincipalAndApiKey1764460200000 } from '../migrations/1764460200000-create-principal-and-api-key.js';
import { CreateTask1764460300000 } from '../migrations/1764460300000-create-task.js';
import { SseStreamCounter1765031400000 } from '../migrations/1765031400000-sse-stream-counter.js';
import { TaskChangeVersion1765031500000 } from '../migrations/1765031500000-task-change-version.js';
import { AddTaskTraceContext1765047318245 } from '../migrations/1765047318245-add-task-trace-context.js';
import { SessionPrincipalLiveIndex1765071946000 } from '../migrations/1765071946000-session-principal-live-index.js';
import { TaskUsageCounters1765110000000 } from '../migrations/1765110000000-task-usage-counters.js';
import { TaskUsageBulkInsert1765120000000 } from '../migrations/1765120000000-task-usage-bulk-insert.js';
import { OutstandingClientRequests1765130000000 } from '../migrations/1765130000000-outstanding-client-requests.js';
import { DurableExecution1765200000000 } from '../migrations/1765200000000-durable-execution.js';
import { AuditTrail1765300000000 } from '../migrations/1765300000000-audit-trail.js';
import { ConsoleIndexes1765300000002 } from '../migrations/1765300000002-console-indexes.js';
import { InstanceRole1765300000003 } from '../migrations/1765300000003-instance-role.js';
import { QueueSharing1765400000000 } from '../migrations/1765400000000-queue-sharing.js';

/**
 * The one list of entities and migrations, kept at the composition root: `database/` builds the data source
 * from whatever schema it is given and never imports a feature. Explicit classes rather than globs, so the
 * app, the TypeORM CLI and the drift check see exactly the same schema whether they run from src (jest) or
 * dist (node).
 */
export const ENTITIES = [
  ServiceInstance,
  McpSession,
  SseEvent,
  SseStream,
  ClientResponse,
  PrincipalRecord,
  ApiKey,
  Task,
  ToolQueueRow,
  ToolRunStart,
  AuditEventRow,
];
export const MIGRATIONS = [
  CreateServiceInstance1764460000000,
  CreateSessions1764460100000,
  CreatePrincipalAndApiKey1764460200000,
  CreateTask1764460300000,
  SseStreamCounter1765031400000,
  TaskChangeVersion1765031500000,
  AddTaskTraceContext1765047318245,
  SessionPrincipalLiveIndex1765071946000,
  TaskUsageCounters1765110000000,
  TaskUsageBulkInsert1765120000000,
  OutstandingClientRequests1765130000000,
  DurableExecution1765200000000,
  AuditTrail1765300000000,
  ConsoleIndexes1765300000002,
  InstanceRole1765300000003,
  QueueSharing1765400000000,
];

/** The schema as `database/` takes it (see `buildDataSourceOptions`). */
export const SCHEMA: DatabaseSchema = { entities: ENTITIES, migrations: MIGRATIONS };
