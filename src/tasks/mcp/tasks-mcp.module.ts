import { Module, type OnModuleInit } from '@nestjs/common';
import { registerErrorMapper } from '../../common/error-mappers.js';
import { ProtocolModule } from '../../protocol/protocol.module.js';
import { SessionsModule } from '../../sessions/sessions.module.js';
import { TasksModule } from '../tasks.module.js';
import { TaskError } from '../tasks.errors.js';
import { LegacyTasksMethods } from './legacy/legacy-tasks.methods.js';
import { LegacyToolsCall } from './legacy/legacy-tools-call.js';
import { ModernTasksMethods } from './modern/modern-tasks.methods.js';
import { ModernToolsCall } from './modern/modern-tools-call.js';
import { TaskListenFilter } from './modern/task-listen-filter.js';
import { TaskStatusOutbox } from './task-status-outbox.js';
import { mapTaskError } from './tasks.error-mapper.js';

/**
 * The MCP face of tasks, both eras on top of the registry: tools/call escalation, the tasks/* methods of each
 * era (legacy/, modern/), the legacy status outbox and the modern listen filter, all registered in the method
 * registry at init, and the JSON-RPC error every TaskError maps to.
 * The transport it needs (a session's GET stream) comes through the SessionStream port, which `gateway/`
 * provides globally. TaskToolRunner (the tasks core's TaskWork) comes from the global TaskWorkModule.
 */
@Module({
  imports: [TasksModule, ProtocolModule, SessionsModule],
  providers: [
    LegacyToolsCall,
    LegacyTasksMethods,
    ModernToolsCall,
    ModernTasksMethods,
    TaskStatusOutbox,
    TaskListenFilter,
  ],
})
export class TasksMcpModule implements OnModuleInit {
  onModuleInit(): void {
    registerErrorMapper(TaskError, mapTaskError);
  }
}
