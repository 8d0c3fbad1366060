import type { INestApplication } from '@nestjs/common';
import { MetricsService } from '../../src/metrics/metrics.service.js';
import type {
  InputRequest,
  TaskExecutionContext,
  TaskOutcome,
  TaskSnapshot,
} from '../../src/tasks/task.types.js';
import type { TaskWork } from '../../src/tasks/execution/task-work.port.js';

/** One call of the executor that the test finishes by hand. */
export interface ControlledRun {
  task: TaskSnapshot;
  ctx: TaskExecutionContext;
  complete(result?: Record<string, unknown>): void;
  fail(code: number, message: string): void;
  park(requests: Record<string, InputRequest>, handlerState?: unknown): void;
  throwError(err: Error): void;
}

/**
 * A TaskWork whose runs stay open until the test settles them, so tests control exactly when (and
 * how late) a worker reports.
 */
export class ControlledExecutor implements TaskWork {
  readonly runs: ControlledRun[] = [];
  private readonly listeners: (() => void)[] = [];

  execute(task: TaskSnapshot, ctx: TaskExecutionContext): Promise<TaskOutcome> {
    return new Promise<TaskOutcome>((resolve, reject) => {
      this.runs.push({
        task,
        ctx,
        complete: (result = { content: [{ type: 'text', text: 'done' }] }) =>
          resolve({ kind: 'completed', result }),
        fail: (code, message) => resolve({ kind: 'failed', error: { code, message } }),
        park: (requests, handlerState) => resolve({ kind: 'input_required', requests, handlerState }),
        throwError: (err) => reject(err),
      });
      for (const l of this.listeners.splice(0)) l();
    });
  }

  /** The n-th run (0-based) of a task, waiting for it to start. */
  async run(taskId: string, n = 0, timeoutMs = 5000): Promise<ControlledRun> {
    return waitFor(() => this.runs.filter((r) => r.task.id === taskId)[n], timeoutMs);
  }
}

export function waitFor<T>(
  pred: () => T | undefined | Promise<T | undefined>,
  ms = 5000,
  stepMs = 20,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const tick = (): void => {
      Promise.resolve(pred()).then((v) => {
        if (v !== undefined && v !== null && v !== false) return resolve(v);
        if (Date.now() - t0 > ms) return reject(new Error('condition not met in time'));
        setTimeout(tick, stepMs);
      }, reject);
    };
    tick();
  });
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The current value of a counter or gauge in an app's registry for the given labels (0 when absent). */
export async function metricValue(
  app: INestApplication,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const metric = app.get(MetricsService).registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const data = await metric.get();
  let sum = 0;
  for (const v of data.values) {
    const l = v.labels as Record<string, string | number>;
    if (Object.entries(labels).every(([k, want]) => String(l[k]) === want)) sum += v.value;
  }
  return sum;
}
