import { correlationId, internalErrorText, isInfrastructureFault } from '../common/internal-fault.js';
import {
  Inject,
  Injectable,
  Logger,
  Optional,
  type BeforeApplicationShutdown,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { PgBusService } from '../bus/pg-bus.service.js';
import { AppConfig } from '../config/app-config.js';
import { InstancesService } from '../instances/instances.service.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import { isTerminal, isTaskStatus } from './task-state.js';
import { TaskMetrics } from './task-metrics.service.js';
import {
  TASK_WORK_EXECUTOR,
  type TaskErrorPayload,
  type TaskExecutionContext,
  type TaskOutcome,
  type TaskSnapshot,
  type TaskWorkExecutor,
} from './task.types.js';
import {
  TASK_CHANNEL,
  TasksRepository,
  type WorkerFence,
  type WorkerWriteResult,
} from './tasks.repository.js';

interface RunningTask {
  fence: WorkerFence;
  toolName: string;
  createdAt: Date;
  controller: AbortController;
  /** Set when shutdown took the task over: the worker's own late outcome is then ignored. */
  shutdown: boolean;
  /** The work has returned; what is left is recording its outcome, so there is nothing to abort. */
  settled: boolean;
  done: Promise<void>;
}

export const SHUTDOWN_ERROR: TaskErrorPayload = { code: -32603, message: 'server shutting down' };
const SHUTDOWN_STATUS = 'server shutting down: the task was interrupted';

function errorPayload(err: unknown, correlation: string): TaskErrorPayload {
  // McpProtocolError (tool-dispatch) and anything shaped like it carry a JSON-RPC code of their own.
  const e = err as { code?: unknown; message?: unknown; data?: unknown };
  if (
    e &&
    !isInfrastructureFault(err) &&
    typeof e.code === 'number' &&
    Number.isInteger(e.code) &&
    typeof e.message === 'string'
  ) {
    return e.data === undefined
      ? { code: e.code, message: e.message }
      : { code: e.code, message: e.message, data: e.data };
  }
  // Anything else is a fault of ours: its text stays in the log, the client gets the id to quote.
  return { code: -32603, message: internalErrorText(correlation) };
}

/**
 * Runs task work in the background on this instance. Each run gets an AbortController; the outcome is
 * written fenced by (generation, instance), so a run that lost its task (cancel or expiry on any instance,
 * a rescue, a resume elsewhere) can never change it, and the dropped write is counted.
 *
 * - Cancellation anywhere reaches the worker: every task change is published on the bus at commit, and a
 *   terminal status or a new generation for a task running here aborts it. The lease renewal (one batched
 *   UPDATE every TASK_LEASE_MS / 3) doubles as a safety net for missed notifications: a task it no longer
 *   holds is aborted too.
 * - Shutdown: running work gets what is left of SHUTDOWN_GRACE_MS since the drain began, then is aborted
 *   and its task failed honestly ("server shutting down") rather than left for the lease to lapse, so
 *   clients learn at once and no one waits for a worker that will never come back.
 */
@Injectable()
export class TaskRunnerService implements OnModuleInit, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger(TaskRunnerService.name);
  private readonly running = new Map<string, RunningTask>();
  private executor: TaskWorkExecutor | null;
  private leaseTimer: NodeJS.Timeout | undefined;
  private drainStartedAt: number | undefined;
  private offBus: (() => void) | undefined;
  private offResync: (() => void) | undefined;

  constructor(
    private readonly repo: TasksRepository,
    private readonly bus: PgBusService,
    private readonly instances: InstancesService,
    private readonly config: AppConfig,
    private readonly metrics: TaskMetrics,
    private readonly lifecycle: LifecycleService,
    @Optional() @Inject(TASK_WORK_EXECUTOR) executor?: TaskWorkExecutor,
  ) {
    this.executor = executor ?? null;
  }

  onModuleInit(): void {
    this.offBus = this.bus.subscribe(TASK_CHANNEL, (payload) => this.onChange(payload));
    this.offResync = this.bus.onResync(() => void this.renewLeases());
    this.lifecycle.onDrain(() => {
      this.drainStartedAt = Date.now();
    });
    this.leaseTimer = setInterval(
      () => void this.renewLeases(),
      Math.max(250, Math.floor(this.config.TASK_LEASE_MS / 3)),
    );
    this.leaseTimer.unref();
  }

  /** The protocol layer plugs in the work (when it does not provide TASK_WORK_EXECUTOR). */
  setExecutor(executor: TaskWorkExecutor): void {
    this.executor = executor;
  }

  get instanceId(): string {
    return this.instances.instanceId;
  }

  /** Ids of the tasks with a worker on this instance. */
  runningTaskIds(): string[] {
    return [...this.running.keys()];
  }

  isRunning(taskId: string): boolean {
    return this.running.has(taskId);
  }

  /**
   * Runs the executor for a task leased to this instance: a fresh task, or one resumed after its last input
   * arrived (answers and handler state come from the snapshot).
   */
  start(task: TaskSnapshot): void {
    const executor = this.executor;
    const controller = new AbortController();
    const fence = this.fenceOf(task);
    const ctx: TaskExecutionContext = {
      signal: controller.signal,
      answers: task.inputResponses,
      handlerState: task.handlerState,
      inputRound: task.inputRounds,
      setStatus: async (status, statusMessage) => {
        const r = await this.repo.setWorkerStatus(fence, status, statusMessage ?? null);
        if (!r.applied) this.metrics.staleWrite(task.toolName);
        return r.applied;
      },
    };
    const outcome = executor
      ? Promise.resolve().then(() => executor.execute(task, ctx))
      : Promise.reject(new Error('no TaskWorkExecutor is configured'));
    this.launch(task, controller, outcome);
  }

  /**
   * Takes over work that is already running (the extension era's inline window ran out): from now on its
   * outcome is recorded on the task, cancellation aborts `controller`, and its lease is renewed.
   */
  adopt(task: TaskSnapshot, controller: AbortController, outcome: Promise<TaskOutcome>): void {
    this.launch(task, controller, outcome);
  }

  /** Aborts the local worker of a task, if any (cancellation on this instance does not wait for the bus). */
  abortLocal(taskId: string, reason: string): boolean {
    const entry = this.running.get(taskId);
    if (!entry || entry.settled) return false;
    if (!entry.controller.signal.aborted) entry.controller.abort(new Error(reason));
    return true;
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.leaseTimer);
    const graceEnd = (this.drainStartedAt ?? Date.now()) + this.config.SHUTDOWN_GRACE_MS;
    const wait = this.drainStartedAt === undefined ? 0 : Math.max(0, graceEnd - Date.now());
    if (this.running.size > 0 && wait > 0) {
      await Promise.race([Promise.allSettled([...this.running.values()].map((r) => r.done)), sleep(wait)]);
    }
    const left = [...this.running.values()];
    if (left.length > 0) this.logger.warn(`failing ${left.length} running task(s): server shutting down`);
    await Promise.allSettled(
      left.map(async (entry) => {
        entry.shutdown = true;
        entry.controller.abort(new Error('server shutting down'));
        const r = await this.repo.failIfCurrent(entry.fence, SHUTDOWN_ERROR, SHUTDOWN_STATUS);
        if (r.applied) this.metrics.taskFinished(entry, 'failed');
      }),
    );
    // Give aborted workers a moment to unwind; their outcomes are ignored.
    await Promise.race([Promise.allSettled(left.map((r) => r.done)), sleep(1000)]);
  }

  onApplicationShutdown(): void {
    clearInterval(this.leaseTimer);
    this.offBus?.();
    this.offResync?.();
  }

  private fenceOf(task: TaskSnapshot): WorkerFence {
    return { taskId: task.id, generation: task.generation, instanceId: this.instances.instanceId };
  }

  private launch(task: TaskSnapshot, controller: AbortController, outcome: Promise<TaskOutcome>): void {
    const entry: RunningTask = {
      fence: this.fenceOf(task),
      toolName: task.toolName,
      createdAt: task.createdAt,
      controller,
      shutdown: false,
      settled: false,
      done: Promise.resolve(),
    };
    if (task.instanceId !== this.instances.instanceId) {
      this.logger.error(`task ${task.id} is not leased to this instance; not running it`);
      controller.abort(new Error('task not leased to this instance'));
      return;
    }
    this.running.get(task.id)?.controller.abort(new Error('superseded by a newer run'));
    this.running.set(task.id, entry);
    entry.done = outcome
      .then(
        (o) => this.record(entry, { ok: true, outcome: o }),
        (err: unknown) => this.record(entry, { ok: false, error: err }),
      )
      .catch((err: unknown) => {
        this.logger.error(`recording the outcome of task ${task.id} failed: ${describe(err)}`);
      })
      .finally(() => {
        if (this.running.get(task.id) === entry) this.running.delete(task.id);
      });
  }

  private async record(
    entry: RunningTask,
    settled: { ok: true; outcome: TaskOutcome } | { ok: false; error: unknown },
  ): Promise<void> {
    entry.settled = true;
    if (entry.shutdown) return;
    let outcome: TaskOutcome;
    if (settled.ok) {
      outcome = settled.outcome;
    } else {
      // A worker that throws after being aborted is acknowledging the abort: its task is no longer its own.
      if (entry.controller.signal.aborted) return;
      const id = correlationId();
      this.logger.error(
        `task ${entry.fence.taskId} (${entry.toolName}) threw [${id}]: ${describe(settled.error)}`,
        settled.error instanceof Error ? settled.error.stack : undefined,
      );
      outcome = { kind: 'failed', error: errorPayload(settled.error, id) };
    }
    let result: WorkerWriteResult | Awaited<ReturnType<TasksRepository['parkForInput']>>;
    switch (outcome.kind) {
      case 'completed':
        result = await this.repo.completeIfCurrent(entry.fence, outcome.result);
        if (result.applied) this.metrics.taskFinished(entry, 'completed');
        break;
      case 'failed':
        result = await this.repo.failIfCurrent(entry.fence, outcome.error);
        if (result.applied) this.metrics.taskFinished(entry, 'failed');
        break;
      case 'input_required':
        result = await this.repo.parkForInput(entry.fence, outcome.requests, outcome.handlerState, {
          maxRounds: this.config.TASK_MAX_INPUT_ROUNDS,
          maxKeys: this.config.TASK_MAX_INPUT_KEYS,
          maxStateBytes: this.config.TASK_MAX_HANDLER_STATE_BYTES,
        });
        if (result.applied && result.limitBroken) this.metrics.taskFinished(entry, 'failed');
        break;
    }
    if (!result.applied) {
      this.metrics.staleWrite(entry.toolName);
      this.logger.debug?.(
        `dropped a late ${outcome.kind} write for task ${entry.fence.taskId} (${result.reason})`,
      );
    }
  }

  private onChange(payload: Record<string, unknown>): void {
    const id = payload.taskId;
    if (typeof id !== 'string') return;
    const entry = this.running.get(id);
    if (!entry) return;
    const status = payload.status;
    const generation = Number(payload.generation);
    if ((isTaskStatus(status) && isTerminal(status)) || generation !== entry.fence.generation) {
      this.abortLocal(id, isTaskStatus(status) ? `task ${status}` : 'task changed hands');
    }
  }

  private async renewLeases(): Promise<void> {
    const ids = [...this.running.keys()];
    if (ids.length === 0) return;
    try {
      const held = await this.repo.renewLeases(this.instances.instanceId, ids, this.config.TASK_LEASE_MS);
      for (const id of ids) {
        const entry = this.running.get(id);
        if (entry && !held.has(id) && !entry.shutdown)
          this.abortLocal(id, 'task no longer held by this instance');
      }
    } catch (err) {
      this.logger.warn(`lease renewal failed: ${describe(err)}`);
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
