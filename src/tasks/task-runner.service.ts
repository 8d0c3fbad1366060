import { correlationId, internalErrorText, isInfrastructureFault } from '../common/internal-fault.js';
import { unstorableText, UnstorableValueError } from '../common/storable-text.js';
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
import { InstancesService } from '../instances/instances.service.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import { context, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import { startTaskSpan } from '../telemetry/task-spans.js';
import { isTerminal, isTaskStatus } from './task-state.js';
import { TaskMetrics } from './task-metrics.service.js';
import { ProgressThrottle, progressMessage } from './progress-throttle.js';
import {
  TASK_WORK_EXECUTOR,
  type ProgressReport,
  type TaskErrorPayload,
  type TaskExecutionContext,
  type TaskOutcome,
  type TaskSnapshot,
  type TaskWorkExecutor,
} from './task.types.js';
import { TaskError, TaskErrorCode } from './tasks.errors.js';
import { UnresolvedWriteError } from './unresolved-write.js';
import {
  TASK_CHANNEL,
  TasksRepository,
  type ExpiryReading,
  type ParkResult,
  type WorkerFence,
  type WorkerWriteResult,
} from './tasks.repository.js';
import { LifecycleConfig } from '../lifecycle/lifecycle.config.js';
import { TasksConfig } from './tasks.config.js';

/** One run of a task on this instance: a task id at one generation (a resume is a new run). */
interface RunningTask {
  fence: WorkerFence;
  /** Whose task it is: only the owner's reads may wait for its outcome (see outcomeInFlight). */
  ownerId: string;
  toolName: string;
  createdAt: Date;
  controller: AbortController;
  /** Progress → statusMessage, at most one write per TASK_PROGRESS_WRITE_MS. */
  progress: ProgressThrottle;
  /** Set when shutdown took the task over: the worker's own late outcome is then ignored. */
  shutdown: boolean;
  /** A renewal found the task is no longer this run's: it was aborted and dropped from the table at once. */
  lost: boolean;
  /** The work has returned; what is left is recording its outcome, so there is nothing to abort. */
  settled: boolean;
  done: Promise<void>;
  /** The outcome as written, once the final write applied (what a read waiting for it may answer). */
  written?: WrittenOutcome;
  /** The run's span, a child of the span that created the task (non-recording when tracing is off). */
  span: Span;
}

/** A run's final write as it landed: the task it left, and its expiry by the database clock when known. */
export interface WrittenOutcome {
  task: TaskSnapshot;
  expiry?: ExpiryReading;
}

/** Backoff of a fenced final write that failed (lock_timeout, reset connection, failover). */
const WRITE_RETRY_BASE_MS = 100;
const WRITE_RETRY_CAP_MS = 2000;

export type WriteOp = 'complete' | 'fail' | 'park';

/** A final write that no attempt can land: PostgreSQL refuses its data (see unstorableReason). */
interface Unstorable {
  unstorable: string;
}

/**
 * Why a write can never land, or null when another attempt may: a value known to be unstorable, or one
 * PostgreSQL refused as data (SQLSTATE class 22, data exception) or as over one of its limits (class 54).
 * Only the SQLSTATE is told: the server's text may name tables and types.
 */
function unstorableReason(err: unknown): string | null {
  if (err instanceof UnstorableValueError) return err.message;
  if (!isInfrastructureFault(err)) return null;
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string') return null;
  if (code.startsWith('22')) return `PostgreSQL refused it as invalid data (SQLSTATE ${code})`;
  if (code.startsWith('54')) return `it is over one of PostgreSQL's limits (SQLSTATE ${code})`;
  return null;
}

/** What a final write stores of an outcome: its name, the root of paths into it, and the value. */
function storedPart(outcome: TaskOutcome): [what: string, root: string, value: unknown] {
  switch (outcome.kind) {
    case 'completed':
      return ['result', 'result', outcome.result];
    case 'failed':
      return ['error', 'error', outcome.error];
    case 'input_required':
      return ['input request', 'input', { requests: outcome.requests, handlerState: outcome.handlerState }];
  }
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
    private readonly config: TasksConfig,
    private readonly lifecycleConfig: LifecycleConfig,
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
      this.drainStartedAt = performance.now();
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
    let report: (u: ProgressReport) => void = () => undefined;
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
      reportProgress: (u) => report(u),
    };
    const span = startTaskSpan(`execute_tool ${task.toolName}`, task, {
      'gen_ai.operation.name': 'execute_tool',
      'mcp.task.input_round': task.inputRounds,
    });
    const outcome = executor
      ? context.with(trace.setSpan(context.active(), span), () =>
          Promise.resolve().then(() => executor.execute(task, ctx)),
        )
      : Promise.reject(new Error('no TaskWorkExecutor is configured'));
    report = this.launch(task, controller, outcome, span);
  }

  /**
   * Takes over work that is already running (the extension era's inline window ran out): from now on its
   * outcome is recorded on the task, cancellation aborts `controller`, and its lease is renewed. Returns
   * where the work's progress goes from now on (the task's statusMessage), since the request that started
   * it has been answered.
   */
  adopt(
    task: TaskSnapshot,
    controller: AbortController,
    outcome: Promise<TaskOutcome>,
  ): (u: ProgressReport) => void {
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

  private launch(
    task: TaskSnapshot,
    controller: AbortController,
    outcome: Promise<TaskOutcome>,
    span: Span,
  ): (u: ProgressReport) => void {
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
        (err) => this.logger.debug?.(`progress of task ${task.id} not written: ${describe(err)}`),
      ),
      shutdown: false,
      lost: false,
      settled: false,
      done: Promise.resolve(),
      span,
    };
    const report = (u: ProgressReport): void => {
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
    entry.done = outcome
      .then(
        (o) => this.record(entry, { ok: true, outcome: o }),
        (err: unknown) => this.record(entry, { ok: false, error: err }),
      )
      .catch((err: unknown) => {
        this.logger.error(`recording the outcome of task ${task.id} failed: ${describe(err)}`);
      })
      .finally(() => {
        entry.span.end();
        if (this.running.get(task.id) === entry) this.running.delete(task.id);
      });
    return report;
  }

  private async record(
    entry: RunningTask,
    settled: { ok: true; outcome: TaskOutcome } | { ok: false; error: unknown },
  ): Promise<void> {
    entry.settled = true;
    await entry.progress.stop();
    if (entry.shutdown) {
      entry.span.addEvent('task.shutdown', { 'mcp.task.status': 'failed' });
      return;
    }
    if (entry.lost) {
      entry.span.addEvent('task.lost');
      return;
    }
    let outcome: TaskOutcome;
    if (settled.ok) {
      outcome = settled.outcome;
    } else if (entry.controller.signal.aborted) {
      // A worker that throws after being aborted is acknowledging the abort. Usually the task is no longer
      // this run's (cancelled, expired, superseded) and the fenced write below is dropped; if it still is
      // (an abort with no change behind it), the task fails now instead of waiting for its lease to lapse.
      const reason: unknown = entry.controller.signal.reason;
      entry.span.addEvent('task.aborted');
      outcome = {
        kind: 'failed',
        error: { code: -32603, message: `Task aborted: ${describe(reason)}` },
      };
    } else {
      const id = correlationId();
      this.logger.error(
        `task ${entry.fence.taskId} (${entry.toolName}) threw [${id}]: ${describe(settled.error)}`,
        settled.error instanceof Error ? settled.error.stack : undefined,
      );
      outcome = { kind: 'failed', error: errorPayload(settled.error, id) };
    }
    const aborted = entry.controller.signal.aborted && !settled.ok;
    let written = await this.writeOutcome(entry, outcome);
    if (written !== null && 'unstorable' in written) {
      // No retry can store it: the task fails now, saying why, instead of after TASK_WRITE_RETRY_MS of
      // retries and the janitor's "worker lost".
      const [what, root, stored] = storedPart(outcome);
      const message = `The tool's ${what} could not be stored: ${unstorableText(stored, root) ?? written.unstorable}`;
      outcome = { kind: 'failed', error: { code: -32603, message } };
      written = await this.writeOutcome(entry, outcome);
    }
    const result = written !== null && 'unstorable' in written ? null : written;
    if (result?.applied && isTerminal(result.task.status)) {
      this.metrics.taskFinished(entry, result.task.status === 'completed' ? 'completed' : 'failed');
    }
    if (result?.applied)
      entry.written = { task: result.task, expiry: 'expiry' in result ? result.expiry : undefined };
    if (result) traceOutcome(entry.span, outcome, result);
    else
      entry.span.setStatus({ code: SpanStatusCode.ERROR, message: `the ${outcome.kind} write never landed` });
    if (result && !result.applied) {
      if (result.reason === 'expired') this.metrics.taskFinished(entry, 'expired');
      // An aborted run losing its task is the expected end of a cancel, not a stale write.
      else if (!aborted) this.metrics.staleWrite(entry.toolName);
      this.logger.debug?.(
        `dropped a late ${outcome.kind} write for task ${entry.fence.taskId} (${result.reason})`,
      );
    }
  }

  /** The final write of `outcome`, retried (see writeWithRetry). */
  private writeOutcome(
    entry: RunningTask,
    outcome: TaskOutcome,
  ): Promise<WorkerWriteResult | ParkResult | Unstorable | null> {
    switch (outcome.kind) {
      case 'completed': {
        const r = outcome.result;
        return this.writeWithRetry(entry, 'complete', () => this.repo.completeIfCurrent(entry.fence, r));
      }
      case 'failed': {
        const e = outcome.error;
        return this.writeWithRetry(entry, 'fail', () => this.repo.failIfCurrent(entry.fence, e));
      }
      case 'input_required': {
        const { requests, handlerState } = outcome;
        return this.writeWithRetry(entry, 'park', () =>
          this.repo.parkForInput(entry.fence, requests, handlerState, {
            maxRounds: this.config.TASK_MAX_INPUT_ROUNDS,
            maxKeys: this.config.TASK_MAX_INPUT_KEYS,
            maxStateBytes: this.config.TASK_MAX_HANDLER_STATE_BYTES,
          }),
        );
      }
    }
  }

  /**
   * A fenced final write, retried with jittered exponential backoff while it fails for a reason the next
   * attempt may not have (lock_timeout behind another transaction, a reset connection, a database restart or
   * failover), for up to TASK_WRITE_RETRY_MS. The retries outlive the lease on purpose: during an outage no
   * lease can be renewed, yet the work is done, and the fence (status live, same generation, same instance)
   * makes every attempt safe — a task the janitor failed meanwhile, or another run took, refuses the write
   * instead of taking it twice. After an outage the janitor waits one lease period of good health before it
   * fails lapsed leases, which is when these retries land. Null when it never landed: that is logged and
   * counted in mcp_task_write_failures_total{op}, and the janitor fails the task "worker lost". A write
   * whose data PostgreSQL can never store is not retried at all: it comes back as Unstorable.
   */
  private async writeWithRetry<R>(
    entry: RunningTask,
    op: WriteOp,
    write: () => Promise<R>,
  ): Promise<R | Unstorable | null> {
    const started = performance.now();
    // An attempt whose COMMIT answer was lost and not yet found out: the next attempt asks whether it
    // landed before writing again, since a second write would find the task no longer the run's.
    let unresolved: UnresolvedWriteError<R> | undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        const landed = unresolved && (await this.repo.landed(unresolved));
        unresolved = undefined;
        const r = landed ? landed.value : await write();
        if (attempt > 1) this.metrics.writeRetried(op, attempt);
        return r;
      } catch (err) {
        if (err instanceof UnresolvedWriteError) unresolved = err as UnresolvedWriteError<R>;
        const unstorable = unstorableReason(err);
        if (unstorable !== null) {
          this.metrics.writeFailed(op);
          const cause = err instanceof UnstorableValueError ? '' : ` (${describe(err)})`;
          this.logger.error(
            `the ${op} of task ${entry.fence.taskId} cannot be stored: ${unstorable}${cause}`,
          );
          return { unstorable };
        }
        const retryable = !(err instanceof TaskError) || err.code === TaskErrorCode.TASK_BUSY;
        const delay =
          Math.min(WRITE_RETRY_CAP_MS, WRITE_RETRY_BASE_MS * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2);
        const windowLeft = started + this.config.TASK_WRITE_RETRY_MS - performance.now();
        if (!retryable || windowLeft <= delay || entry.lost || entry.shutdown) {
          this.metrics.writeFailed(op);
          this.logger.error(
            `could not write the ${op} of task ${entry.fence.taskId} after ${attempt} attempt(s): ${describe(err)}`,
          );
          return null;
        }
        this.logger.warn(
          `writing the ${op} of task ${entry.fence.taskId} failed (attempt ${attempt}): ${describe(err)}; retrying`,
        );
        await sleep(delay);
      }
    }
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
      }
    } catch (err) {
      this.instances.noteDbError();
      this.logger.warn(`lease renewal failed: ${describe(err)}`);
    }
  }
}

/** The run's span records what became of the task (the state change it caused, or the dropped write). */
function traceOutcome(
  span: Span,
  outcome: TaskOutcome,
  result: { applied: boolean; task?: TaskSnapshot | null },
): void {
  if (!span.isRecording()) return;
  if (!result.applied) {
    span.addEvent('task.stale_write_dropped', { 'mcp.task.outcome': outcome.kind });
    return;
  }
  const status = result.task?.status ?? outcome.kind;
  span.addEvent('task.status', { 'mcp.task.status': status });
  span.setAttribute('mcp.task.status', status);
  if (outcome.kind === 'failed') {
    span.setAttribute('error.type', String(outcome.error.code));
    span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error.message });
  } else if (outcome.kind === 'completed' && outcome.result.isError === true) {
    span.setAttribute('error.type', 'tool_error');
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'tool returned isError' });
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
