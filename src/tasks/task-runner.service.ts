import { errorMessage } from '../common/error-message.js';
import {
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { PgBusService } from '../bus/pg-bus.service.js';
import { InstancesService } from '../instances/instances.service.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import { context, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import { startTaskSpan } from '../telemetry/task-spans.js';
import { isTerminal, isTaskStatus } from './task-state.js';
import { TaskMetrics } from './task-metrics.service.js';
import { ProgressThrottle, progressMessage } from './progress-throttle.js';
import {
  type RunStart,
  type TaskExecutionContext,
  type TaskOutcome,
  type TaskSnapshot,
} from './task.types.js';
import { TASK_CHANNEL } from './task-change-publisher.js';
import { TaskWork } from './task-work.js';
import type { ProgressUpdate } from '../tool-dispatch/tool-context.js';
import { SHUTDOWN_ERROR, SHUTDOWN_STATUS } from './task-failures.js';
import { TaskOutcomeRecorder } from './task-outcome-recorder.js';
import { TaskOutcomesRepository } from './task-outcomes.repository.js';
import { sleep, type RunningTask, type WrittenOutcome } from './task-run.js';
import { TaskWorkerRepository, type WorkerFence } from './task-worker.repository.js';
import { LifecycleConfig } from '../lifecycle/lifecycle.config.js';
import { TasksConfig } from './tasks.config.js';

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
  private leaseTimer: NodeJS.Timeout | undefined;
  private drainStartedAt: number | undefined;
  private offBus: (() => void) | undefined;
  private offResync: (() => void) | undefined;
  private readonly startedListeners = new Set<(taskId: string) => void>();
  private readonly settledListeners = new Set<() => void>();

  constructor(
    private readonly repo: TaskWorkerRepository,
    private readonly outcomes: TaskOutcomesRepository,
    private readonly recorder: TaskOutcomeRecorder,
    private readonly bus: PgBusService,
    private readonly instances: InstancesService,
    private readonly config: TasksConfig,
    private readonly lifecycleConfig: LifecycleConfig,
    private readonly metrics: TaskMetrics,
    private readonly lifecycle: LifecycleService,
    private readonly work: TaskWork,
  ) {}

  onModuleInit(): void {
    this.offBus = this.bus.subscribe(TASK_CHANNEL, (payload) => this.onChange(payload));
    this.offResync = this.bus.onResync(() => void this.renewLeases());
    this.lifecycle.onDrain(() => {
      this.drainStartedAt = performance.now();
    });
    this.leaseTimer = setInterval(
      () => void this.renewLeases(),
      Math.max(250, Math.floor(this.config.TASK_LEASE_MS / 3)),
    );
    this.leaseTimer.unref();
  }

  get instanceId(): string {
    return this.instances.instanceId;
  }

  /**
   * Runs of this instance, each holding one of its TASK_WORKER_CONCURRENCY slots (TaskClaimer): started,
   * claimed or adopted, until their outcome is written (or they are found lost).
   */
  get runCount(): number {
    return this.running.size;
  }

  /** Calls `listener(taskId)` whenever a run of this instance is registered (it holds a slot from then on). */
  onRunStarted(listener: (taskId: string) => void): () => void {
    this.startedListeners.add(listener);
    return () => this.startedListeners.delete(listener);
  }

  /** Calls `listener()` whenever a run of this instance gives its slot back. */
  onRunSettled(listener: () => void): () => void {
    this.settledListeners.add(listener);
    return () => this.settledListeners.delete(listener);
  }

  /** Ids of the tasks with a worker on this instance. */
  runningTaskIds(): string[] {
    return [...this.running.keys()];
  }

  isRunning(taskId: string): boolean {
    return this.running.has(taskId);
  }

  /**
   * Runs the executor for a task leased to this instance: a fresh task, one resumed after its last input
   * arrived (answers and handler state come from the snapshot), or one claimed from the queue (`run`: what
   * the claim read from its row).
   */
  start(task: TaskSnapshot, run: RunStart = {}): void {
    const controller = new AbortController();
    const fence = this.fenceOf(task);
    let report: (u: ProgressUpdate) => void = () => undefined;
    const ctx: TaskExecutionContext = {
      signal: controller.signal,
      answers: task.inputResponses,
      handlerState: task.handlerState,
      inputRound: task.inputRounds,
      storedPrincipal: run.principal ?? null,
      setStatus: async (status, statusMessage) => {
        const r = await this.repo.setWorkerStatus(fence, status, statusMessage ?? null);
        if (!r.applied) this.metrics.staleWrite(task.toolName);
        return r.applied;
      },
      reportProgress: (u) => report(u),
    };
    const span = startTaskSpan(`execute_tool ${task.toolName}`, task, {
      'gen_ai.operation.name': 'execute_tool',
      'mcp.task.input_round': task.inputRounds,
    });
    const outcome = context.with(trace.setSpan(context.active(), span), () =>
      Promise.resolve().then(() => this.work.execute(task, ctx)),
    );
    report = this.launch(task, controller, outcome, span);
  }

  /**
   * Takes over work that is already running (the modern era's inline window ran out): from now on its
   * outcome is recorded on the task, cancellation aborts `controller`, and its lease is renewed. Returns
   * where the work's progress goes from now on (the task's statusMessage), since the request that started
   * it has been answered.
   */
  adopt(
    task: TaskSnapshot,
    controller: AbortController,
    outcome: Promise<TaskOutcome>,
  ): (u: ProgressUpdate) => void {
    // The work started inline under the request's span; this span covers its life as a task.
    const span = startTaskSpan(`execute_tool ${task.toolName}`, task, {
      'gen_ai.operation.name': 'execute_tool',
      'mcp.task.escalated': true,
    });
    return this.launch(task, controller, outcome, span);
  }

  /**
   * When this instance's run of the task has returned and its outcome is being written, the promise of that
   * write (it settles when the write lands or is given up); otherwise undefined. A read that waits for it
   * answers with the outcome instead of a "working" the client would only poll again. Only for the task's
   * owner: anyone else must not wait, or how long a read of a foreign id takes would tell that it exists
   * and is finishing.
   */
  outcomeInFlight(taskId: string, ownerId: string): Promise<WrittenOutcome | undefined> | undefined {
    const entry = this.running.get(taskId);
    if (!entry?.settled || entry.ownerId !== ownerId) return undefined;
    return entry.done.then(() => entry.written);
  }

  /**
   * Aborts the local run of a task, if any, whatever its generation (cancellation and expiry end the task
   * itself; on this instance they do not wait for the bus).
   */
  abortLocal(taskId: string, reason: string): boolean {
    const entry = this.running.get(taskId);
    if (!entry) return false;
    return this.abortRun(entry, reason);
  }

  private abortRun(entry: RunningTask, reason: string): boolean {
    if (entry.settled) return false;
    if (!entry.controller.signal.aborted) entry.controller.abort(new Error(reason));
    return true;
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.leaseTimer);
    const graceEnd = (this.drainStartedAt ?? performance.now()) + this.lifecycleConfig.SHUTDOWN_GRACE_MS;
    const wait = this.drainStartedAt === undefined ? 0 : Math.max(0, graceEnd - performance.now());
    if (this.running.size > 0 && wait > 0) {
      await Promise.race([Promise.allSettled([...this.running.values()].map((r) => r.done)), sleep(wait)]);
    }
    const left = [...this.running.values()];
    if (left.length > 0) this.logger.warn(`failing ${left.length} running task(s): server shutting down`);
    await Promise.allSettled(
      left.map(async (entry) => {
        entry.shutdown = true;
        entry.controller.abort(new Error('server shutting down'));
        const r = await this.outcomes.failIfCurrent(entry.fence, SHUTDOWN_ERROR, SHUTDOWN_STATUS);
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

  private launch(
    task: TaskSnapshot,
    controller: AbortController,
    outcome: Promise<TaskOutcome>,
    span: Span,
  ): (u: ProgressUpdate) => void {
    const fence = this.fenceOf(task);
    const entry: RunningTask = {
      fence,
      ownerId: task.ownerId,
      toolName: task.toolName,
      createdAt: task.createdAt,
      controller,
      progress: new ProgressThrottle(
        async (message) => {
          await this.repo.setProgressMessage(fence, message);
        },
        this.config.TASK_PROGRESS_WRITE_MS,
        (err) => this.logger.debug?.(`progress of task ${task.id} not written: ${errorMessage(err)}`),
      ),
      shutdown: false,
      lost: false,
      settled: false,
      done: Promise.resolve(),
      span,
    };
    const report = (u: ProgressUpdate): void => {
      if (!entry.settled && !entry.lost) entry.progress.report(progressMessage(u));
    };
    if (task.instanceId !== this.instances.instanceId) {
      this.logger.error(`task ${task.id} is not leased to this instance; not running it`);
      controller.abort(new Error('task not leased to this instance'));
      span.setStatus({ code: SpanStatusCode.ERROR, message: 'task not leased to this instance' });
      span.end();
      return () => undefined;
    }
    this.running.get(task.id)?.controller.abort(new Error('superseded by a newer run'));
    this.running.set(task.id, entry);
    this.metrics.runStarted(task.toolName);
    for (const listener of this.startedListeners) listener(task.id);
    entry.done = outcome
      .then(
        (o) => this.recorder.record(entry, { ok: true, outcome: o }),
        (err: unknown) => this.recorder.record(entry, { ok: false, error: err }),
      )
      .catch((err: unknown) => {
        this.logger.error(`recording the outcome of task ${task.id} failed: ${errorMessage(err)}`);
      })
      .finally(() => {
        entry.span.end();
        if (this.running.get(task.id) === entry) this.running.delete(task.id);
        this.runSettled();
      });
    return report;
  }

  private runSettled(): void {
    for (const listener of this.settledListeners) listener();
  }

  private onChange(payload: Record<string, unknown>): void {
    const id = payload.taskId;
    if (typeof id !== 'string') return;
    const entry = this.running.get(id);
    if (!entry) return;
    const status = payload.status;
    const generation = Number(payload.generation);
    // Only a change newer than this run concerns it: a late notification of an earlier generation (say, the
    // park before the resume that started this run) must not abort it.
    if (!Number.isFinite(generation) || generation < entry.fence.generation) return;
    if ((isTaskStatus(status) && isTerminal(status)) || generation > entry.fence.generation) {
      this.abortRun(entry, isTaskStatus(status) ? `task ${status}` : 'task changed hands');
    }
  }

  /**
   * Renews the leases of the runs that are here now, and judges each run by its own generation: a run whose
   * task is gone, at another generation, or no longer leased here is aborted and settled at once (dropped
   * from the table; its outcome would be refused anyway), and a run started meanwhile under the same task id
   * is left alone.
   */
  private async renewLeases(): Promise<void> {
    const runs = [...this.running.values()];
    if (runs.length === 0) return;
    try {
      const { held, expired } = await this.repo.renewLeases(
        this.instances.instanceId,
        runs.map((r) => r.fence.taskId),
        this.config.TASK_LEASE_MS,
      );
      for (const t of expired) this.metrics.taskFinished(t, 'expired');
      for (const entry of runs) {
        if (entry.shutdown) continue;
        const state = held.get(entry.fence.taskId);
        if (state && state.generation === entry.fence.generation) continue;
        entry.lost = true;
        if (entry.settled) continue; // its write, if still retrying, stops; the fence would refuse it
        this.abortRun(entry, 'task no longer held by this run');
        if (this.running.get(entry.fence.taskId) === entry) this.running.delete(entry.fence.taskId);
        this.runSettled();
      }
    } catch (err) {
      this.instances.noteDbError();
      this.logger.warn(`lease renewal failed: ${errorMessage(err)}`);
    }
  }
}
