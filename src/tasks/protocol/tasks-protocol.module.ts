import { Module } from '@nestjs/common';
import { ProtocolModule } from '../../protocol/protocol.module.js';
import { SessionsModule } from '../../sessions/sessions.module.js';
import { TasksModule } from '../tasks.module.js';
import { LegacyTasksMethods } from './legacy-tasks.methods.js';
import { ModernTasksMethods } from './modern-tasks.methods.js';
import { TaskListenFilter } from './task-listen-filter.js';
import { TaskStatusOutbox } from './task-status-outbox.js';
import { ToolCallEscalation } from './tool-call-escalation.js';

/**
 * The tasks protocol of both eras on top of the registry: tools/call escalation, the tasks/* methods of each
 * era, the legacy status outbox and the modern listen filter, all registered in the method registry at init.
 * The transport it needs (a session's GET stream) comes through the SessionStream port, which `gateway/`
 * provides globally. TaskToolRunner (the tasks core's TaskWork) comes from the global TaskWorkModule.
 */
@Module({
  imports: [TasksModule, ProtocolModule, SessionsModule],
  providers: [ToolCallEscalation, LegacyTasksMethods, ModernTasksMethods, TaskStatusOutbox, TaskListenFilter],
})
export class TasksProtocolModule {}
