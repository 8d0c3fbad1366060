import { errorMessage } from '../../common/error-message.js';
import {
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { asActor } from '../../audit/audit-context.js';
import type { AuditActor } from '../../audit/audit.types.js';
import { PgBusService } from '../../bus/pg-bus.service.js';
import { InstancesService } from '../../instances/instances.service.js';
import { LifecycleService } from '../../lifecycle/lifecycle.service.js';
import { context, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import { startTaskSpan } from '../../telemetry/task-spans.js';
import { isTerminal, isTaskStatus } from '../task-state.js';
import { TaskMetrics } from '../task-metrics.service.js';
import { ProgressThrottle, progressMessage } from './progress-throttle.js';
import {
  type RunStart,
  type TaskExecutionContext,
  type TaskOutcome,
  type TaskSnapshot,
} from '../task.types.js';
import { TASK_CHANNEL } from '../store/task-change-publisher.js';
import { TaskWork } from './task-work.port.js';
import type { ProgressUpdate } from '../../tool-dispatch/tool-context.js';
import { handedOverMessage, SHUTDOWN_ERROR, SHUTDOWN_STATUS } from '../task-failures.js';
import { TaskOutcomeRecorder } from './task-outcome-recorder.js';
import { TaskOutcomesRepository } from '../store/task-outcomes.repository.js';
import {
  CheckpointChain,
  sleep,
  type RunHandle,
  type RunningTask,
  type WrittenOutcome,
} from './running-task.js';
import { CheckpointError } from '../../tool-dispatch/checkpoint.js';
import type { JsonValue } from '../../tool-dispatch/tool-context.js';
import { QuotaService } from '../../quotas/quota.service.js';
import { TaskWorkerRepository, type WorkerFence } from '../store/task-worker.repository.js';
import { LifecycleConfig } from '../../lifecycle/lifecycle.config.js';
import { TasksConfig } from '../tasks.config.js';

/**
 * Who a run's writes are audited as. A run started from a request (a creation leased here, a resume, an
 * inline call adopted as a task) would otherwise inherit that request's context, and its completion would
 * read as the owner's doing.
 */
const WORKER: AuditActor = { kind: 'worker' };

/** At shutdown, how long the hand-over writes may take before a database that does not answer is given up. */
const HANDOVER_WAIT_MS = 3000;
/** How long a hand-over waits for the run's checkpoint writes in flight before it re-queues the task. */
const CHECKPOINT_WAIT_MS = 1000;

/**
 * Runs task work in the background on this instance. Each run gets an AbortController; the outcome is
 * written fenced by (generation, instance), so a run that lost its task (cancel or expiry on any instance,
 * a rescue, a resume elsewhere) can never change it, and the dropped write is counted.
 *
 * - Cancellation anywhere reaches the worker: every task change is published on the bus at commit, and a
 *   terminal status or a new generation for a task running here aborts it. The lease renewal (one batched
 *   UPDATE every TASK_LEASE_MS / 3) doubles as a safety net for missed notifications: a task it no longer
 *   holds is aborted too.
 * - Shutdown: the run of a resumable task is handed over the moment the drain is announced (SIGTERM): its
 *   task goes back to the queue as its next attempt (TaskWorkerRepository.requeue, fenced, not counted as a
 *   failure) and only then is the run aborted, so its late outcome is refused and another instance, or the
 *   next incarnation of this one, claims the task and goes on from its last checkpoint. When that write
 *   cannot be made (database down), the run is left as a lost worker's: its lease lapses and the janitor
 *   re-queues it. Other running work gets what is left of SHUTDOWN_GRACE_MS since the drain began, then is
 *   aborted and its task failed honestly ("server shutting down") rather than left for the lease to lapse,
 *   so clients learn at once and no one waits for a worker that will never come back.
 */
@Injectable()
export class TaskRunnerService implements OnModuleInit, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger(TaskRunnerService.name);
  private readonly running = new Map<string, RunningTask>();
  private leaseTimer: NodeJS.Timeout | undefined;
  private drainStartedAt: number | undefined;
  /** The drain was announced: resumable runs are handed over, including any that start from now on. */
  private handingOver = false;
  /**
   * The application has shut down (its pool is closing or closed): nothing a run writes from now on can
   * land, so every run still here, and any a claim already under way starts after the shutdown's own pass,
   * counts as taken by the shutdown and gives its writes up at their next failure instead of retrying
   * against a closed pool for TASK_WRITE_RETRY_MS (the lease lapses; the janitor ends or re-queues the task).
   */
  private closed = false;
  private offBus: (() => void) | undefined;
  private offResync: (() => void) | undefined;
  private readonly startedListeners = new Set<(taskId: string) => void>();
  private readonly slotListeners = new Set<() => void>();
  private readonly endedListeners = new Set<(toolName: string) => void>();

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
    private readonly quotaService: QuotaService,
  ) {}

  onModuleInit(): void {
    this.offBus = this.bus.subscribe(TASK_CHANNEL, (payload) => this.onChange(payload));
    this.offResync = this.bus.onResync(() => void asActor(WORKER, () => this.renewLeases()));
    this.lifecycle.onDrain(() => {
      this.drainStartedAt = performance.now();
    });
    this.lifecycle.onDrainAnnounced(() => {
      this.handingOver = true;
      void asActor(WORKER, () => this.handOverResumable());
    });
    this.leaseTimer = setInterval(
      () => void asActor(WORKER, () => this.renewLeases()),
      Math.max(250, Math.floor(this.config.TASK_LEASE_MS / 3)),
    );
    this.leaseTimer.unref();
  }

  /**
   * The TASK_WORKER_CONCURRENCY slots (TaskClaimer) these runs hold: one per run whose work has not returned,
   * so the next task starts while an outcome commits (under load that takes longer than a short tool's work).
   * Writes pending beyond as many as there are slots hold one each: a slow database stops the claims.
   */
  get slotsHeld(): number {
    let working = 0;
    let writing = 0;
    for (const entry of this.running.values()) {
      if (entry.settled) writing++;
      else working++;
    }
    return working + Math.max(0, writing - this.config.TASK_WORKER_CONCURRENCY);
  }

  /**
   * Tasks whose run here has returned while its outcome is still being written: they run no more, so the
   * claim does not count them as running (fair shares, tool limits) although their rows still say so.
   */
  endedUnwritten(): string[] {
    const ids: string[] = [];
    for (const [id, entry] of this.running) if (entry.settled) ids.push(id);
    return ids;
  }

  /** Calls `listener(taskId)` whenever a run of this instance is registered (it holds a slot from then on). */
  onRunStarted(listener: (taskId: string) => void): () => void {
    this.startedListeners.add(listener);
    return () => this.startedListeners.delete(listener);
  }

  /**
   * Calls `listener(toolName)` whenever a run of this instance has ended and its outcome is written (or
   * refused): the run no longer counts against its tool's limits anywhere.
   */
  onRunEnded(listener: (toolName: string) => void): () => void {
    this.endedListeners.add(listener);
    return () => this.endedListeners.delete(listener);
  }

  /** Calls `listener()` whenever a run of this instance may have given its slot back (see slotsHeld). */
  onSlotFreed(listener: () => void): () => void {
    this.slotListeners.add(listener);
    return () => this.slotListeners.delete(listener);
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
    asActor(WORKER, () => this.startRun(task, run));
  }

  private startRun(task: TaskSnapshot, run: RunStart): void {
    const controller = new AbortController();
    const fence = this.fenceOf(task);
    const checkpoints = this.checkpointChain(task, fence);
    let report: (u: ProgressUpdate) => void = () => undefined;
    const span = startTaskSpan(`execute_tool ${task.toolName}`, task, {
      'gen_ai.operation.name': 'execute_tool',
      'mcp.task.input_round': task.inputRounds,
      'mcp.task.attempt': task.attempt,
    });
    const outcome = context.with(trace.setSpan(context.active(), span), () =>
      Promise.resolve().then(async () => {
        // A claim brings the checkpoint along; a first run of a fresh task has none; anything else (a run
        // resumed after input) reads it.
        const checkpoint =
          'checkpoint' in run
            ? ((run.checkpoint ?? undefined) as JsonValue | undefined)
            : task.attempt > 1 || task.inputRounds > 0
              ? await this.repo.readCheckpoint(task.id)
              : undefined;
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
          attempt: task.attempt,
          checkpoint,
          saveCheckpoint: (state) => checkpoints.save(state),
        };
        return this.work.execute(task, ctx);
      }),
    );
    report = this.launch(task, controller, outcome, span, checkpoints)?.report ?? (() => undefined);
  }

  /**
   * Takes over work that is already running (the modern era's inline window ran out, or its handler threw
   * an error its retry policy retries): from now on its outcome is recorded on the task, cancellation aborts
   * `controller`, and its lease is renewed. `pendingCheckpoint` is the last state the work saved inline
   * (written first, under the task's fence). Returns where the work's progress and checkpoints go from now
   * on, since the request that started it has been answered, and when its outcome is written.
   */
  adopt(
    task: TaskSnapshot,
    controller: AbortController,
    outcome: Promise<TaskOutcome>,
    opts: { pendingCheckpoint?: { state: unknown } } = {},
  ): RunHandle {
    // Its outcome is recorded from here on as the worker's (the reactions registered below run as it).
    return asActor(WORKER, () => this.adoptRun(task, controller, outcome, opts));
  }

  private adoptRun(
    task: TaskSnapshot,
    controller: AbortController,
    outcome: Promise<TaskOutcome>,
    opts: { pendingCheckpoint?: { state: unknown } },
  ): RunHandle {
    // The work started inline under the request's span; this span covers its life as a task.
    const span = startTaskSpan(`execute_tool ${task.toolName}`, task, {
      'gen_ai.operation.name': 'execute_tool',
      'mcp.task.escalated': true,
    });
    const checkpoints = this.checkpointChain(task, this.fenceOf(task));
    // Queued before the run is launched, so its outcome (written after every checkpoint) cannot pass it.
    if (opts.pendingCheckpoint) {
      checkpoints.save(opts.pendingCheckpoint.state).catch((err: unknown) => {
        this.logger.warn(`task ${task.id}: its inline checkpoint was not saved: ${errorMessage(err)}`);
      });
    }
    const launched = this.launch(task, controller, outcome, span, checkpoints);
    return {
      report: launched ? launched.report : () => undefined,
      checkpoint: (state) => checkpoints.save(state),
      done: launched ? launched.entry.done.then(() => launched.entry.written) : Promise.resolve(undefined),
    };
  }

  /** The fenced checkpoint writes of one run, in order; a refused one rejects naming why. */
  private checkpointChain(task: TaskSnapshot, fence: WorkerFence): CheckpointChain {
    return new CheckpointChain(async (state) => {
      const r = await this.repo.saveCheckpoint(fence, this.quotaService.checkpointJson(state));
      if (r.applied) return;
      this.metrics.staleWrite(task.toolName);
      throw new CheckpointError(
        `The checkpoint was not saved: task ${task.id} is no longer held by this run (${r.reason})`,
      );
    });
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
   * The outcome this instance's current run of the task wrote, once its recording has ended (undefined when
   * no write applied: the task was cancelled, expired or taken over meanwhile); undefined when no run of it
   * is here. For a call that answers with what its task recorded (an Idempotency-Key's inline window).
   */
  recordedOutcome(taskId: string): Promise<WrittenOutcome | undefined> | undefined {
    const entry = this.running.get(taskId);
    if (!entry) return undefined;
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

  beforeApplicationShutdown(): Promise<void> {
    return asActor(WORKER, () => this.shutdownRuns());
  }

  private async shutdownRuns(): Promise<void> {
    // The lease timer keeps renewing (fenced, as always) the leases of the runs still going through the
    // grace, whatever its length against TASK_LEASE_MS; waitForRuns stops it once the grace is over, before
    // it fails or abandons what is left, and the finally stops it on any other way out.
    try {
      await this.waitForRuns();
    } finally {
      clearInterval(this.leaseTimer);
    }
  }

  private async waitForRuns(): Promise<void> {
    // Without a SIGTERM (app.close()) the hand-over starts here; after one it retries what did not land.
    this.handingOver = true;
    await this.handOverResumable(HANDOVER_WAIT_MS);
    const graceEnd = (this.drainStartedAt ?? performance.now()) + this.lifecycleConfig.SHUTDOWN_GRACE_MS;
    const wait = this.drainStartedAt === undefined ? 0 : Math.max(0, graceEnd - performance.now());
    const staying = (): RunningTask[] => [...this.running.values()].filter((r) => !r.handedOver);
    if (staying().length > 0 && wait > 0) {
      await Promise.race([Promise.allSettled(staying().map((r) => r.done)), sleep(wait)]);
      await this.handOverResumable(HANDOVER_WAIT_MS);
    }
    // From here nothing is renewed: plain runs are failed below, and a resumable run that could not be handed
    // over must let its lease lapse so that the janitor re-queues it.
    clearInterval(this.leaseTimer);
    const left = staying();
    const plain = left.filter((r) => !r.resumable);
    // A run that has returned is writing its outcome: it is left to finish that.
    const unreleased = left.filter((r) => r.resumable && !r.settled);
    if (plain.length > 0) this.logger.warn(`failing ${plain.length} running task(s): server shutting down`);
    if (unreleased.length > 0) {
      this.logger.warn(
        `${unreleased.length} resumable task(s) could not be handed over; the janitor re-queues them when their lease lapses`,
      );
    }
    for (const entry of unreleased) {
      // A lost worker's end: nothing is written, the lease lapses and the rescue re-queues the task.
      entry.shutdown = true;
      entry.controller.abort(new Error('server shutting down'));
    }
    await Promise.allSettled(
      plain.map(async (entry) => {
        entry.shutdown = true;
        entry.controller.abort(new Error('server shutting down'));
        const r = await this.outcomes.failIfCurrent(entry.fence, SHUTDOWN_ERROR, SHUTDOWN_STATUS);
        if (r.applied) this.metrics.taskFinished(entry, 'failed');
      }),
    );
    // Give aborted workers (handed over ones too) a moment to unwind; their outcomes are ignored.
    const all = [...this.running.values()];
    await Promise.race([Promise.allSettled(all.map((r) => r.done)), sleep(1000)]);
  }

  /**
   * Hands over every resumable run still here (see handOver), waiting at most `waitMs` for the writes when
   * given (a database that does not answer must not hold the shutdown).
   */
  private async handOverResumable(waitMs?: number): Promise<void> {
    const runs = [...this.running.values()].filter((r) => r.resumable && !r.handedOver && !r.settled);
    if (runs.length === 0) return;
    const all = Promise.allSettled(runs.map((r) => this.handOver(r)));
    await (waitMs === undefined ? all : Promise.race([all, sleep(waitMs)]));
  }

  /**
   * Gives the run's task back to the queue as its next attempt, claimable at once and not counted as a
   * failure, then aborts the run: in this order, so that the fence has moved before the handler can answer,
   * and its late outcome is refused. A run that returned meanwhile keeps its outcome (the requeue finds the
   * task no longer working, or the outcome write finds it no longer the run's and is dropped); a refused
   * requeue leaves the run to end as a plain one. A write that fails leaves the run running: the shutdown
   * tries again, and past that the lease lapses (the janitor's rescue).
   */
  private handOver(entry: RunningTask): Promise<void> {
    if (entry.handedOver || entry.settled) return Promise.resolve();
    entry.handover ??= this.writeHandOver(entry).finally(() => {
      entry.handover = undefined;
    });
    return entry.handover;
  }

  private async writeHandOver(entry: RunningTask): Promise<void> {
    // The checkpoints the run asked for land first: the requeue fences out whatever comes after it.
    await Promise.race([entry.checkpoints.settled(), sleep(CHECKPOINT_WAIT_MS)]);
    // A run that has returned meanwhile is its recorder's: what it came to is written as such (a retryable
    // failure counts as a failed attempt and waits its backoff), never as a free hand-over.
    if (entry.settled) return;
    try {
      const r = await this.repo.requeue(entry.fence, {
        delayMs: 0,
        failed: false,
        statusMessage: handedOverMessage(entry.attempt + 1),
      });
      if (r.applied) {
        entry.handedOver = true;
        this.metrics.handedOver(entry.toolName);
        entry.span.addEvent('task.handed_over', { 'mcp.task.attempt': entry.attempt });
        this.abortRun(entry, 'handed over at shutdown');
      } else {
        // Not a working task of this run's: waiting for legacy input on this instance's stream (which cannot
        // move), or no longer its own (then the bus or the lease renewal aborts it). Either way it ends as a
        // plain run does: the grace, then a fenced "server shutting down".
        entry.resumable = false;
      }
    } catch (err) {
      this.instances.noteDbError();
      this.logger.warn(`hand-over of task ${entry.fence.taskId} not written: ${errorMessage(err)}`);
    }
  }

  onApplicationShutdown(): void {
    this.closed = true;
    for (const entry of this.running.values()) entry.shutdown = true;
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
    checkpoints: CheckpointChain,
  ): { entry: RunningTask; report: (u: ProgressUpdate) => void } | undefined {
    const fence = this.fenceOf(task);
    const entry: RunningTask = {
      fence,
      ownerId: task.ownerId,
      toolName: task.toolName,
      createdAt: task.createdAt,
      resumable: task.resumable,
      controller,
      progress: new ProgressThrottle(
        async (message) => {
          await this.repo.setProgressMessage(fence, message);
        },
        this.config.TASK_PROGRESS_WRITE_MS,
        (err) => this.logger.debug?.(`progress of task ${task.id} not written: ${errorMessage(err)}`),
      ),
      shutdown: this.closed,
      handedOver: false,
      lost: false,
      settled: false,
      done: Promise.resolve(),
      span,
      attempt: task.attempt,
      failedAttempts: task.failedAttempts,
      maxAttempts: task.maxAttempts,
      checkpoints,
    };
    const report = (u: ProgressUpdate): void => {
      if (!entry.settled && !entry.lost) entry.progress.report(progressMessage(u));
    };
    if (task.instanceId !== this.instances.instanceId) {
      this.logger.error(`task ${task.id} is not leased to this instance; not running it`);
      controller.abort(new Error('task not leased to this instance'));
      span.setStatus({ code: SpanStatusCode.ERROR, message: 'task not leased to this instance' });
      span.end();
      return undefined;
    }
    this.running.get(task.id)?.controller.abort(new Error('superseded by a newer run'));
    this.running.set(task.id, entry);
    this.metrics.runStarted(task.toolName);
    for (const listener of this.startedListeners) listener(task.id);
    // A resumable run that starts while this instance drains (an inline call that outgrew its window, a
    // resume) goes straight back to the queue for an instance that stays.
    if (this.handingOver && entry.resumable) void this.handOver(entry);
    entry.done = outcome
      .then(
        (o) => ({ ok: true as const, outcome: o }),
        (err: unknown) => ({ ok: false as const, error: err }),
      )
      .then((settled) => {
        // The work has returned: its slot is free from here (slotsHeld) while the outcome is written.
        entry.settled = true;
        this.slotFreed();
        return this.recorder.record(entry, settled);
      })
      .catch((err: unknown) => {
        this.logger.error(`recording the outcome of task ${task.id} failed: ${errorMessage(err)}`);
      })
      .finally(() => {
        entry.span.end();
        if (this.running.get(task.id) === entry) this.running.delete(task.id);
        this.slotFreed();
        for (const listener of this.endedListeners) listener(task.toolName);
      });
    return { entry, report };
  }

  private slotFreed(): void {
    for (const listener of this.slotListeners) listener();
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
        if (entry.shutdown || entry.handedOver) continue;
        const state = held.get(entry.fence.taskId);
        if (state && state.generation === entry.fence.generation) continue;
        entry.lost = true;
        if (entry.settled) continue; // its write, if still retrying, stops; the fence would refuse it
        this.abortRun(entry, 'task no longer held by this run');
        if (this.running.get(entry.fence.taskId) === entry) this.running.delete(entry.fence.taskId);
        this.slotFreed();
      }
    } catch (err) {
      this.instances.noteDbError();
      this.logger.warn(`lease renewal failed: ${errorMessage(err)}`);
    }
  }
}
