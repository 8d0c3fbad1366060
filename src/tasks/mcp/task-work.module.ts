import { Module, type DynamicModule } from '@nestjs/common';
import { ProtocolModule } from '../../protocol/protocol.module.js';
import { SessionsModule } from '../../sessions/sessions.module.js';
import { ToolDispatchModule } from '../../tool-dispatch/tool-dispatch.module.js';
import { TaskWork } from '../execution/task-work.port.js';
import { TaskToolRunner } from './task-tool-runner.service.js';

/**
 * Provides the tasks core's TaskWork port: a task's tool call, run by TaskToolRunner. The module cycle
 * (TaskRunnerService needs the work; the tasks protocol needs TasksService and the runner) is cut here:
 * TaskToolRunner depends on protocol/, sessions and the transport port, never on TasksModule, and this
 * module is global, so TasksModule receives TaskWork by constructor injection without importing anything
 * of the protocol. `work` replaces the implementation (a test's or a benchmark's controlled work); the
 * composition root passes it through AppModuleOptions.
 */
@Module({})
export class TaskWorkModule {
  static forRoot(work?: TaskWork): DynamicModule {
    return {
      module: TaskWorkModule,
      global: true,
      imports: [ProtocolModule, SessionsModule, ToolDispatchModule],
      providers: [
        TaskToolRunner,
        work ? { provide: TaskWork, useValue: work } : { provide: TaskWork, useExisting: TaskToolRunner },
      ],
      exports: [TaskWork, TaskToolRunner],
    };
  }
}
