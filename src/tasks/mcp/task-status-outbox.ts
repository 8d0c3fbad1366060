import { Injectable, type OnModuleInit } from '@nestjs/common';
import { inTaskSpan } from '../../telemetry/task-spans.js';
import { TasksService } from '../registry/tasks.service.js';
import { TaskChangePublisher } from '../store/task-change-publisher.js';
import { SessionStream } from '../../protocol/session-stream.port.js';
import { legacyTask } from './task-wire.js';

/**
 * Legacy era (2025-11-25): notifications/tasks/status on the creating session's GET stream. The notification
 * is logged inside the very transaction that changes the task (an outbox). It exists exactly when the change
 * commits, whichever instance made it and whatever happens to any LISTEN connection; the stream's holder, on
 * any instance, drains it when woken at commit or, if that NOTIFY is lost, at the resync after its bus
 * reconnects.
 */
@Injectable()
export class TaskStatusOutbox implements OnModuleInit {
  constructor(
    private readonly tasks: TasksService,
    private readonly publisher: TaskChangePublisher,
    private readonly stream: SessionStream,
  ) {}

  onModuleInit(): void {
    this.publisher.addChangeHook(async (tx, task) => {
      if (task.era !== 'legacy' || !task.sessionId) return;
      const sessionId = task.sessionId;
      await inTaskSpan(
        'notifications/tasks/status',
        task,
        async () =>
          this.stream.publishInTransaction(tx, sessionId, {
            jsonrpc: '2.0',
            method: 'notifications/tasks/status',
            params: legacyTask(task),
          }),
        { 'mcp.method.name': 'notifications/tasks/status', 'mcp.task.status': task.status },
      );
    });
    // The change's own NOTIFY (at the same commit) is the wake-up for the session's GET stream.
    this.tasks.onTaskChanged((change) => {
      if (change.era === 'legacy' && change.sessionId) this.stream.wakeHolder(change.sessionId);
    });
  }
}
