import type { TaskExecutionContext, TaskOutcome, TaskSnapshot } from '../task.types.js';

/**
 * The work behind a task, supplied by the protocol layer (it knows tools, handlers and eras). The runner
 * calls `execute` for the first run and again for every resume after an input round, and records the
 * outcome fenced by the task's generation.
 *
 * An abstract class so that it is its own injection token: the tasks core declares the port and injects it
 * into TaskRunnerService; `tasks/mcp/task-work.module.ts` provides it (globally, so that this module
 * never imports the protocol, which imports this module).
 */
export abstract class TaskWork {
  abstract execute(task: TaskSnapshot, ctx: TaskExecutionContext): Promise<TaskOutcome>;
}
