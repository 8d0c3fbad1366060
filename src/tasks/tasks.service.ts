import { CheckpointError } from '../tool-dispatch/checkpoint.js';
import { Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { PgBusService } from '../bus/pg-bus.service.js';
import { InstancesService } from '../instances/instances.service.js';
import { linkActiveSpanToTask } from '../telemetry/task-spans.js';
import { captureTraceContext } from '../telemetry/trace-context.js';
import { decodeCursor, encodeCursor, isWellFormedTaskId, newTaskId } from './task-ids.js';
import { FinishedTaskCache } from './finished-task-cache.js';
import { isTerminal } from './task-state.js';
import { TaskMetrics, type CreationMode } from './task-metrics.service.js';
import { TaskRunnerService } from './task-runner.service.js';
import type { TaskChange, TaskEra, TaskOutcome, TaskSnapshot } from './task.types.js';
import { TaskError, TaskErrorCode } from './tasks.errors.js';
import { UnresolvedLeases } from './unresolved-leases.js';
import { TASK_CHANNEL, type TaskChangeHook } from './task-change-publisher.js';
import type { ProgressUpdate } from '../tool-dispatch/tool-context.js';
import { TaskCreationRepository, type NewTask } from './task-creation.repository.js';
import { UnstorableValueError } from '../common/storable-text.js';
import type { CreationLimits } from './creation-limits.js';
import { TasksRepository, type MergeResult, type VersionedTask } from './tasks.repository.js';
import { QuotaService } from '../quotas/quota.service.js';
import { QuotasConfig } from '../quotas/quotas.config.js';
import { RetryableFailure } from './task-retry.js';
import type { RunHandle } from './task-run.js';
import { TasksConfig } from './tasks.config.js';
import { TaskClaimer } from './task-claimer.service.js';
import { QUEUED_MESSAGE } from './task-queue.js';

export interface CreateTaskInput {
  /** The principal id (Principal.id) that will own the task. */
  ownerId: string;
  /** Legacy era: the session that created it. */
  sessionId?: string | null;
  era: TaskEra;
  toolName: string;
  /** The original tools/call params, stored as is. */
  requestParams: Record<string, unknown>;
  /** The client's requested ttl (legacy era `params.task.ttl`); clamped, defaulted. */
  requestedTtlMs?: number | null;
  mode?: CreationMode;
  statusMessage?: string | null;
  /** From the tool's durability declaration (DurabilityPolicy); defaults: not resumable, one attempt. */
  resumable?: boolean;
  maxAttempts?: number;
  /** The tool's longest expected run: a task without a requested ttl is granted one covering it. */
  maxRunMs?: number | null;
  /**
   * The owner's principal as the creating request saw it (id, provider, subject, scopes, groups: see
   * storedPrincipal), kept with the task so a run claimed on another instance calls the tool as the same
   * caller.
   */
  principal?: Record<string, unknown> | null;
}

/**
 * Where a new task's work runs: `here` leases it to this instance (the caller starts it), `queue` inserts it
 * queued for whichever instance has a free slot first (TaskClaimer).
 */
export type TaskPlacement = 'here' | 'queue';

/** A creation named by an Idempotency-Key (createKeyed). */
export interface KeyedTaskInput extends CreateTaskInput {
  idempotencyKey: string;
  /** Hash of the tool and arguments (never the ttl or _meta): what makes a repeat "the same call". */
  requestHash: string;
}

/** How a modern call with an Idempotency-Key went (runKeyed). */
export type KeyedRunResult =
  /** The key already named a task (this call created nothing): answer from that task. */
  | { kind: 'repeat'; task: TaskSnapshot }
  /** Created, and its work ended inside the window with this outcome, recorded on `task` (as written). */
  | { kind: 'inline'; outcome: TaskOutcome; task: TaskSnapshot }
  /** Created, and it ended inside the window as `task` says (a worker elsewhere ran it, or it threw). */
  | { kind: 'finished'; task: TaskSnapshot }
  /** Created, and still running (or queued) when the window ran out: the CreateTaskResult. */
  | { kind: 'task'; task: TaskSnapshot };

export interface TaskPage {
  tasks: TaskSnapshot[];
  /** Present when more tasks follow; pass it back as `cursor`. */
  nextCursor?: string;
}

export type WaitOutcome =
  | { kind: 'terminal'; task: TaskSnapshot }
  /** The task disappeared while waiting (deleted after expiry). */
  | { kind: 'gone' }
  | { kind: 'timeout'; task: TaskSnapshot }
  | { kind: 'aborted'; task: TaskSnapshot };

export type EscalationResult =
  /** The work finished inside the window: answer with its outcome (an input_required outcome is MRTR). */
  | { kind: 'inline'; outcome: TaskOutcome }
  /** The window ran out: the task is committed and the work goes on under the runner. */
  | { kind: 'task'; task: TaskSnapshot }
  /** The caller's request ended (client disconnect) inside the window; the work was aborted. */
  | { kind: 'aborted' }
  /**
   * This instance had no slot for the work (INSTANCE_ROLE=web, or all busy): the task was queued, and a
   * worker finished it inside the window. Answer from the task as it ended.
   */
  | { kind: 'finished'; task: TaskSnapshot };

/**
 * Where the progress of work run by runInlineThenTask goes. Before escalation the caller sends it on the
 * request's own response; from the moment the window runs out that response belongs to the CreateTaskResult,
 * so progress goes to the task (its statusMessage) and nothing else may be written to the response.
 */
export class EscalationLink {
  /** The window ran out: the request's response is no longer the work's to write to. */
  escalated = false;
  private reporter: ((u: ProgressUpdate) => void) | null = null;
  private pending: ProgressUpdate | null = null;
  private saver: ((state: unknown) => Promise<void>) | null = null;
  /** The latest state the work saved before there was a task to save it on (checked already). */
  private pendingCheckpoint: { state: unknown } | undefined;

  /**
   * `serialise`: the checkpoint's stored JSON (QuotaService.checkpointJson: checked against
   * QUOTA_TASK_CHECKPOINT_BYTES and counted when refused), applied at once even while no task exists yet.
   */
  constructor(private readonly serialise: (state: unknown) => string) {}

  /**
   * A checkpoint from the work: checked (JSON, size) at once; before the task exists only the latest is
   * kept (in memory), and written first thing when the call becomes a task.
   */
  async checkpoint(state: unknown): Promise<void> {
    if (this.saver) return this.saver(state);
    // A copy as JSON, so later changes the work makes to its own object are not what gets written.
    this.pendingCheckpoint = { state: JSON.parse(this.serialise(state)) };
  }

  /**
   * Fences the inline run out for good (the call is queued for another run): from now on its checkpoints are
   * refused, and the last one it saved is returned, to be written with the queued row.
   */
  close(): { state: unknown } | undefined {
    this.saver = () =>
      Promise.reject(
        new CheckpointError('The checkpoint was not saved: this run was given up and the task queued'),
      );
    return this.takePendingCheckpoint();
  }

  /** The checkpoint kept while inline, to be written on the task (once). */
  takePendingCheckpoint(): { state: unknown } | undefined {
    const p = this.pendingCheckpoint;
    this.pendingCheckpoint = undefined;
    return p;
  }

  /** Progress from the work; kept (latest only) until the task exists, then handed to it. */
  report(u: ProgressUpdate): void {
    if (!this.escalated) return;
    if (this.reporter) this.reporter(u);
    else this.pending = u;
  }

  attach(handle: Pick<RunHandle, 'report' | 'checkpoint'>): void {
    const reporter = (u: ProgressUpdate): void => handle.report(u);
    this.reporter = reporter;
    this.saver = (state) => handle.checkpoint(state);
    if (this.pending) reporter(this.pending);
    this.pending = null;
  }
}

/** Where a new task goes, and what an inline run queued in its place leaves it (see runInlineThenTask). */
interface NewTaskPlacement {
  placement?: TaskPlacement;
  id?: string;
  /** The checkpoint (stored JSON) the given-up inline run saved. */
  checkpoint?: string | null;
  /** Its first attempt's number. */
  attempt?: number;
}

/** TasksService.grantTtl against the given limits (TasksConfig). */
export function grantedTtlMs(
  limits: Pick<TasksConfig, 'TASK_MAX_TTL_MS' | 'TASK_DEFAULT_TTL_MS'>,
  requested: number | null | undefined,
  maxRunMs?: number | null,
): number {
  const max = limits.TASK_MAX_TTL_MS;
  if (typeof requested !== 'number' || !Number.isFinite(requested) || requested <= 0) {
    const run = typeof maxRunMs === 'number' && Number.isFinite(maxRunMs) && maxRunMs > 0 ? maxRunMs : 0;
    return Math.min(Math.floor(run) + limits.TASK_DEFAULT_TTL_MS, max);
  }
  return Math.max(1, Math.min(Math.floor(requested), max));
}

/** Safety re-read while waiting, in case a notification was missed (polling stays authoritative). */
const WAIT_SAFETY_POLL_MS = 5000;

/** Longest a read waits for this instance's outcome write of the same task (see read()). */
const OUTCOME_WAIT_MS = 100;

/** What `p` settles with within `ms`; undefined when it fails or takes longer. */
async function settledWithin<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const value = await Promise.race([
    p.catch(() => undefined),
    new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), ms);
    }),
  ]);
  clearTimeout(timer);
  return value;
}

/**
 * The task registry's domain API, which the protocol layer calls for both eras. It speaks TaskSnapshot and
 * TaskError, never JSON-RPC: rendering and error mapping belong to the protocol layer.
 */
/**
 * A task finished by a process that has no /metrics of its own (the admin CLI's cancel): that process names
 * one live server instance (`countedBy`), which counts it in mcp_tasks_finished_total, so every terminal
 * transition is counted once, somewhere.
 */
export const TASK_COUNTED_ELSEWHERE_CHANNEL = 'mcp_task_finished_uncounted';

@Injectable()
export class TasksService implements OnModuleInit, OnApplicationShutdown {
  private readonly waiters = new Map<string, Set<() => void>>();
  private offBus: (() => void) | undefined;
  private offResync: (() => void) | undefined;
  private offCounted: (() => void) | undefined;
  constructor(
    private readonly repo: TasksRepository,
    private readonly creations: TaskCreationRepository,
    private readonly runner: TaskRunnerService,
    private readonly bus: PgBusService,
    private readonly instances: InstancesService,
    private readonly config: TasksConfig,
    private readonly quotasConfig: QuotasConfig,
    private readonly metrics: TaskMetrics,
    private readonly claimer: TaskClaimer,
    private readonly quotaService: QuotaService,
    /**
     * Finished tasks as their owners last read them or this instance committed them, until their ttl (they
     * never change before then). Shared with the outcome recorder, which fills it at the commit.
     */
    private readonly finished: FinishedTaskCache,
    private readonly unresolved: UnresolvedLeases,
  ) {}

  onModuleInit(): void {
    this.offBus = this.bus.subscribe(TASK_CHANNEL, (payload) => {
      if (typeof payload.taskId === 'string') this.wake(payload.taskId);
    });
    this.offResync = this.bus.onResync(() => {
      for (const id of [...this.waiters.keys()]) this.wake(id);
    });
    this.offCounted = this.bus.subscribe(TASK_COUNTED_ELSEWHERE_CHANNEL, (p) => {
      if (p.countedBy !== this.instances.instanceId || typeof p.toolName !== 'string') return;
      if (p.status !== 'cancelled' || typeof p.createdAt !== 'string') return;
      this.metrics.taskFinished({ toolName: p.toolName, createdAt: new Date(p.createdAt) }, 'cancelled');
    });
  }

  onApplicationShutdown(): void {
    this.offBus?.();
    this.offResync?.();
    this.offCounted?.();
  }

  /**
   * The ttl a request is granted: its own clamped to TASK_MAX_TTL_MS, else TASK_DEFAULT_TTL_MS; when the
   * tool declares its longest run (`maxRunMs`) and the request asks for no ttl, that run plus
   * TASK_DEFAULT_TTL_MS (the retention after it), clamped too, so no default expires the task mid-run.
   */
  grantTtl(requested: number | null | undefined, maxRunMs?: number | null): number {
    return grantedTtlMs(this.config, requested, maxRunMs);
  }

  /**
   * Creates a working task and commits it before returning, so a tasks/get right after (on any instance)
   * finds it. Throws LIMIT_EXCEEDED naming the limit. Placed `here` (the default where the role runs task
   * work) it is leased to this instance and no work starts: call `runner.start(task)`, or use
   * `createAndStart`, which also decides by the free slots. Placed `queue` (always on INSTANCE_ROLE=web) it
   * waits, `working` with QUEUED_MESSAGE, for a claimer.
   */
  async create(input: CreateTaskInput, opts: NewTaskPlacement = {}): Promise<TaskSnapshot> {
    const task = await this.creations.insertWithLimits(this.newTask(input, opts), this.creationLimits());
    this.metrics.taskCreated(task.toolName, input.mode ?? 'immediate');
    return task;
  }

  /**
   * A task whose work has ended already (a required tool that finished inside the inline window), written
   * once in its final state (TaskCreationRepository.insertFinished) and answered from the finished-task
   * cache afterwards. Throws LIMIT_EXCEEDED like create. An outcome PostgreSQL cannot store takes the
   * two-step path instead: created, then recorded by the runner, whose recorder fails the task saying why.
   */
  async createFinished(
    input: CreateTaskInput,
    outcome: Exclude<TaskOutcome, { kind: 'input_required' }>,
  ): Promise<TaskSnapshot> {
    const t = this.newTask(input, { placement: 'here' });
    const finish =
      outcome.kind === 'completed'
        ? { status: 'completed' as const, result: outcome.result }
        : { status: 'failed' as const, error: outcome.error };
    let written;
    try {
      written = await this.creations.insertFinished(t, finish, this.creationLimits());
    } catch (err) {
      if (!(err instanceof UnstorableValueError)) throw err;
      // Already finished: it takes no slot, so it is leased here whatever the slots say.
      const task = await this.create(input, { placement: 'here' });
      this.runner.adopt(task, new AbortController(), Promise.resolve(outcome));
      return task;
    }
    const { task, expiry } = written;
    this.metrics.taskCreated(task.toolName, input.mode ?? 'immediate');
    // The work that ended inside the window was the task's first run.
    this.metrics.runStarted(task.toolName);
    this.metrics.taskFinished(task, task.status === 'completed' ? 'completed' : 'failed');
    this.finished.put(task, expiry.measuredAt, expiry.msUntilExpiry);
    return task;
  }

  /** The row a creation inserts: leased to this instance (`here`) or queued. */
  private newTask(input: CreateTaskInput, opts: NewTaskPlacement): NewTask {
    if (!input.ownerId || !input.toolName) {
      throw new TaskError(TaskErrorCode.INVALID_ARGUMENT, 'ownerId and toolName are required');
    }
    const here = (opts.placement ?? (this.claimer.runsWork ? 'here' : 'queue')) === 'here';
    return {
      ...this.placementOf(input, here),
      id: opts.id ?? newTaskId(),
      ownerId: input.ownerId,
      sessionId: input.sessionId ?? null,
      era: input.era,
      toolName: input.toolName,
      ttlMs: this.grantTtl(input.requestedTtlMs, input.maxRunMs),
      pollIntervalMs: this.config.TASK_POLL_INTERVAL_MS,
      requestParams: input.requestParams ?? {},
      leaseMs: this.config.TASK_LEASE_MS,
      principal: input.principal ?? null,
      // The request's span (tools/call …) becomes the task's trace: later work links back to it.
      traceContext: captureTraceContext(),
      resumable: input.resumable ?? false,
      maxAttempts: input.maxAttempts ?? 1,
      checkpoint: opts.checkpoint ?? null,
      attempt: opts.attempt ?? 1,
    };
  }

  /** A new row's lease: to this instance (`here`), or none and the queued statusMessage. */
  private placementOf(input: CreateTaskInput, here: boolean): Pick<NewTask, 'instanceId' | 'statusMessage'> {
    return here
      ? { instanceId: this.instances.instanceId, statusMessage: input.statusMessage ?? null }
      : { instanceId: null, statusMessage: QUEUED_MESSAGE };
  }

  private creationLimits(): CreationLimits {
    return {
      maxPerOwner: this.config.TASK_MAX_PER_OWNER,
      maxTotal: this.config.TASK_MAX_TOTAL,
      maxRetainedPerOwner: this.quotasConfig.QUOTA_RETAINED_TASKS_PER_OWNER,
    };
  }

  /**
   * Creates a task named by an Idempotency-Key, alone (never in a commit group) and under the same creation
   * limits as create, placed like create. The owner's key already names a task → that task, with
   * `created: false` (nothing to start): the same call repeated, from this instance or any other. The key
   * used with another tool or other arguments → IDEMPOTENCY_CONFLICT naming the key. Keys are per owner:
   * another owner's use of the same key is another task.
   */
  async createKeyed(
    input: KeyedTaskInput,
    opts: { placement?: TaskPlacement; id?: string } = {},
  ): Promise<{ task: TaskSnapshot; created: boolean }> {
    const r = await this.creations.insertKeyed(
      { ...this.newTask(input, opts), idempotencyKey: input.idempotencyKey, requestHash: input.requestHash },
      this.creationLimits(),
    );
    if (r.requestHash !== input.requestHash) throw TaskError.idempotencyConflict(input.idempotencyKey);
    if (r.created) this.metrics.taskCreated(r.task.toolName, input.mode ?? 'immediate');
    return { task: r.task, created: r.created };
  }

  /**
   * Legacy era with an Idempotency-Key: createAndStart through createKeyed. Only the call that created the
   * task starts it (here with a free slot, else it is queued); a repeat gets the task and starts nothing.
   */
  async createKeyedAndStart(
    input: KeyedTaskInput,
    beforeStart?: (task: TaskSnapshot) => void,
  ): Promise<{ task: TaskSnapshot; created: boolean }> {
    const { id, here, value: r } = await this.placed((placement) => this.createKeyed(input, placement));
    if (here && r.created) {
      beforeStart?.(r.task);
      this.runner.start(r.task, { principal: input.principal ?? null });
    } else if (here) this.claimer.release(id);
    return r;
  }

  /**
   * Modern era with an Idempotency-Key: the call is recorded as a task from the start, so a repeat on any
   * instance finds it. Created with a free slot here → `work` runs as the task's run at once (its outcome
   * recorded on the task, fenced, whenever it ends) and the caller waits for the window: ended inside it →
   * the outcome, recorded before this returns, so a repeat gets the same answer; otherwise the task.
   * Without a slot it is queued and waited for like runInlineThenTask's queued case. The caller leaving does
   * not cancel the work: the key's point is that a client whose connection broke repeats the call and
   * finds its task.
   */
  async runKeyed(
    input: KeyedTaskInput,
    work: (signal: AbortSignal, link: EscalationLink) => Promise<TaskOutcome>,
    opts: { windowMs?: number; signal?: AbortSignal } = {},
  ): Promise<KeyedRunResult> {
    const windowMs = opts.windowMs ?? this.config.TASK_INLINE_WINDOW_MS;
    const { id, here, value: r } = await this.placed((placement) => this.createKeyed(input, placement));
    if (!r.created) {
      if (here) this.claimer.release(id);
      return { kind: 'repeat', task: r.task };
    }
    if (!here) return this.waitWithin(r.task, windowMs, opts.signal);
    return this.runKeyedWindow(r.task, work, windowMs, opts.signal);
  }

  /** The created keyed task's run, here, for the window (see runKeyed). */
  private async runKeyedWindow(
    task: TaskSnapshot,
    work: (signal: AbortSignal, link: EscalationLink) => Promise<TaskOutcome>,
    windowMs: number,
    signal: AbortSignal | undefined,
  ): Promise<KeyedRunResult> {
    const controller = new AbortController();
    const link = new EscalationLink((state) => this.quotaService.checkpointJson(state));
    const running = Promise.resolve().then(() => work(controller.signal, link));
    link.attach(this.runner.adopt(task, controller, running));
    const recorded = this.runner.recordedOutcome(task.id);
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const first = await Promise.race([
      running.then(
        (outcome) => ({ kind: 'done' as const, outcome }),
        () => ({ kind: 'threw' as const }),
      ),
      new Promise<{ kind: 'window' }>((resolve) => {
        timer = setTimeout(() => resolve({ kind: 'window' }), windowMs);
        onAbort = () => resolve({ kind: 'window' });
        if (signal?.aborted) onAbort();
        signal?.addEventListener('abort', onAbort, { once: true });
      }),
    ]);
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    if (first.kind === 'window') {
      link.escalated = true;
      return { kind: 'task', task };
    }
    // Ended (or threw: the recorder failed the task with the error): answer what was recorded.
    const written = await recorded;
    if (!written) return { kind: 'task', task };
    if (first.kind === 'done') return { kind: 'inline', outcome: first.outcome, task: written.task };
    return { kind: 'finished', task: written.task };
  }

  /**
   * Legacy era: create, commit, start the executor in the background, return the handle. The task is leased
   * to this instance when its role runs work and a slot is free (the slot is held from this decision on, so
   * concurrent creations cannot all take the last one); otherwise it is queued and not started here.
   * `beforeStart` runs just before a run starts here.
   */
  async createAndStart(
    input: CreateTaskInput,
    beforeStart?: (task: TaskSnapshot) => void,
  ): Promise<TaskSnapshot> {
    const row = this.newTask(input, { placement: 'queue' });
    let here = false;
    // Decided as the row is sent, not as it starts waiting for its commit group: under load a creation
    // waits about a group's commit for its turn, and a slot reserved meanwhile ran no work (with the
    // default 16 slots, the reservations of creations in line queued most of a burst of short tasks).
    const place = (t: NewTask): void => {
      here = this.claimer.tryReserve(t.id);
      if (here) Object.assign(t, this.placementOf(input, true));
    };
    let task: TaskSnapshot;
    try {
      task = await this.creations.insertWithLimits(row, this.creationLimits(), place);
    } catch (err) {
      if (here) {
        this.claimer.release(row.id);
        // Its COMMIT answer may have been lost with the task leased here: it is run or given back later.
        this.unresolved.afterFailedCreation(row.id, err, this.claimer);
      }
      throw err;
    }
    this.metrics.taskCreated(task.toolName, input.mode ?? 'immediate');
    if (here) {
      beforeStart?.(task);
      this.runner.start(task, { principal: input.principal ?? null });
    }
    return task;
  }

  /**
   * Mints a task id and decides where its task runs: here when this instance runs work and a slot is free
   * (the slot is reserved from this decision until the run starts, so concurrent creations cannot all take
   * the last one), otherwise queued. A creation that throws gives the reserved slot back.
   */
  private async placed<T>(
    create: (placement: { id: string; placement: TaskPlacement }) => Promise<T>,
  ): Promise<{ id: string; here: boolean; value: T }> {
    const id = newTaskId();
    const here = this.claimer.tryReserve(id);
    try {
      return { id, here, value: await create({ id, placement: here ? 'here' : 'queue' }) };
    } catch (err) {
      if (here) {
        this.claimer.release(id);
        // Its COMMIT answer may have been lost with the task leased here: it is run or given back later.
        this.unresolved.afterFailedCreation(id, err, this.claimer);
      }
      throw err;
    }
  }

  /**
   * Modern era: runs `work` inline for the window (TASK_INLINE_WINDOW_MS unless given). Finished in time
   * → its outcome, and no task exists. Not finished → the task is committed, the running work is handed to
   * the runner (outcome recorded, cancel aborts it, lease renewed) and the task is returned. When the
   * creation is refused (a limit), the work is aborted and the TaskError propagates. Work that throws a
   * RetryableFailure inside the window becomes a task too, queued for its retry (answered with the task as
   * the re-queue left it). Checkpoints the work saved inline are written on the task when it is created.
   */
  async runInlineThenTask(
    input: CreateTaskInput,
    work: (signal: AbortSignal, link: EscalationLink) => Promise<TaskOutcome>,
    opts: { windowMs?: number; signal?: AbortSignal } = {},
  ): Promise<EscalationResult> {
    const windowMs = opts.windowMs ?? this.config.TASK_INLINE_WINDOW_MS;
    // No slot here (web role, all busy, draining): the work is not run inline at all, since it could not be
    // kept once the window ran out. It is queued, and answered inline if a worker ends it within the window.
    if (!this.claimer.hasFreeSlot()) return this.queueAndWait(input, windowMs, opts.signal);
    const controller = new AbortController();
    const link = new EscalationLink((state) => this.quotaService.checkpointJson(state));
    const onCallerAbort = (): void => controller.abort(new Error('request closed'));
    opts.signal?.addEventListener('abort', onCallerAbort, { once: true });
    const running = Promise.resolve().then(() => work(controller.signal, link));
    // Keep a rejection from surfacing as unhandled while it is not awaited yet.
    running.catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const first = await Promise.race([
      running.then(
        (outcome) => ({ kind: 'done' as const, outcome }),
        (error: unknown) => ({ kind: 'threw' as const, error }),
      ),
      new Promise<{ kind: 'window' }>((resolve) => {
        timer = setTimeout(() => resolve({ kind: 'window' }), windowMs);
      }),
      new Promise<{ kind: 'aborted' }>((resolve) => {
        if (opts.signal?.aborted) resolve({ kind: 'aborted' });
        opts.signal?.addEventListener('abort', () => resolve({ kind: 'aborted' }), { once: true });
      }),
    ]);
    clearTimeout(timer);
    if (first.kind === 'done') {
      opts.signal?.removeEventListener('abort', onCallerAbort);
      return { kind: 'inline', outcome: first.outcome };
    }
    if (first.kind === 'threw' && !(first.error instanceof RetryableFailure)) {
      opts.signal?.removeEventListener('abort', onCallerAbort);
      throw first.error;
    }
    if (first.kind === 'aborted') {
      controller.abort(new Error('request closed'));
      return { kind: 'aborted' };
    }
    // From here the task lives on independently of the request that started it.
    link.escalated = true;
    opts.signal?.removeEventListener('abort', onCallerAbort);
    const id = newTaskId();
    // An inline call holds no slot; once it becomes a task it must. With none free (a burst of calls
    // escalating together) the inline run is given up and the task queued: it starts again from the top
    // on the first free slot of any instance, and the bound TASK_WORKER_CONCURRENCY holds.
    const reserved = this.claimer.tryReserve(id);
    // A first attempt that failed has ended: all that is left of it is the re-queue for its retry (one
    // write, no work), so it is leased here even without a free slot, and the backoff is kept.
    const here = reserved || first.kind === 'threw';
    // Queued, the inline run is given up: it is fenced out before the row exists (a re-run may claim it at
    // commit), and the last checkpoint it saved is written with the row, which the re-run resumes from as
    // attempt 2 (the inline run was attempt 1; giving it up for want of a slot is not a failure).
    const given = here ? undefined : link.close();
    let task: TaskSnapshot;
    try {
      task = await this.create(
        { ...input, mode: 'escalated' },
        here
          ? { id, placement: 'here' }
          : {
              id,
              placement: 'queue',
              attempt: 2,
              checkpoint: given ? JSON.stringify(given.state) : null,
            },
      );
    } catch (err) {
      if (reserved) this.claimer.release(id);
      controller.abort(new Error('task creation refused'));
      throw err;
    }
    if (!here) {
      controller.abort(new Error('no free worker slot: the task was queued'));
      return { kind: 'task', task };
    }
    const handle = this.runner.adopt(task, controller, running, {
      pendingCheckpoint: link.takePendingCheckpoint(),
    });
    link.attach(handle);
    if (first.kind === 'threw') {
      // The first attempt failed and will be retried: answer with the task as the re-queue left it (its
      // statusMessage names the attempt and when the next one runs).
      const written = await handle.done;
      return { kind: 'task', task: written?.task ?? task };
    }
    return { kind: 'task', task };
  }

  /** The task queued for a worker; waits up to the window for it to end (see runInlineThenTask). */
  private async queueAndWait(
    input: CreateTaskInput,
    windowMs: number,
    signal?: AbortSignal,
  ): Promise<EscalationResult> {
    const task = await this.create({ ...input, mode: 'escalated' }, { placement: 'queue' });
    return this.waitWithin(task, windowMs, signal);
  }

  /** A queued task, answered from as it ended when a worker ends it within the window, else as it is. */
  private async waitWithin(
    task: TaskSnapshot,
    windowMs: number,
    signal?: AbortSignal,
  ): Promise<{ kind: 'finished' | 'task'; task: TaskSnapshot }> {
    if (windowMs <= 0) return { kind: 'task', task };
    const waited = await this.waitForTerminal(task.ownerId, task.id, { timeoutMs: windowMs, signal });
    if (waited.kind === 'terminal') return { kind: 'finished', task: waited.task };
    if (waited.kind === 'gone') return { kind: 'task', task };
    return { kind: 'task', task: waited.task };
  }

  /**
   * The caller's task, or TASK_NOT_FOUND (also for another owner's task: same error, same message). A live
   * task past created + ttl is failed "Task expired" on the spot, so no reader ever sees it live.
   */
  async get(ownerId: string, taskId: string): Promise<TaskSnapshot> {
    const read = await this.read(ownerId, taskId);
    if (!read) throw TaskError.notFound();
    return read.task;
  }

  /** The caller's tasks, newest first, `TASK_LIST_PAGE_SIZE` per page. A cursor this server did not make → INVALID_CURSOR. */
  async list(ownerId: string, cursor?: string | null, limit?: number): Promise<TaskPage> {
    const after = cursor === undefined || cursor === null ? null : decodeCursor(cursor);
    const pageSize = Math.max(1, Math.min(limit ?? this.config.TASK_LIST_PAGE_SIZE, 1000));
    const rows = await this.repo.listOwned(ownerId, after, pageSize + 1);
    const tasks = rows.slice(0, pageSize);
    if (rows.length <= pageSize) return { tasks };
    const last = tasks[tasks.length - 1];
    return { tasks, nextCursor: encodeCursor({ createdAt: last.createdAt, id: last.id }) };
  }

  /**
   * Cancels a live task (input_required included) and aborts its worker wherever it runs. A terminal task
   * → TASK_TERMINAL carrying the task (the legacy era answers -32602 with its status; the modern era
   * acks). Unknown or foreign → TASK_NOT_FOUND.
   */
  async cancel(
    ownerId: string,
    taskId: string,
    message = 'The task was cancelled by request.',
  ): Promise<TaskSnapshot> {
    if (!isWellFormedTaskId(taskId)) throw TaskError.notFound();
    const r = await this.repo.cancelIfLive(ownerId, taskId, message);
    if (!r) throw TaskError.notFound();
    if (r.expired) this.expiredHere(r.task);
    if (!r.applied) {
      throw new TaskError(
        TaskErrorCode.TASK_TERMINAL,
        `Cannot cancel task: already in terminal status '${r.task.status}'`,
        r.task,
      );
    }
    linkActiveSpanToTask(r.task);
    this.metrics.taskFinished(r.task, 'cancelled');
    this.runner.abortLocal(taskId, 'task cancelled');
    return r.task;
  }

  /**
   * tasks/update: merges `responses` into a parked task (unknown and already answered keys are ignored).
   * When the last outstanding key is answered the task is working again and this instance resumes the
   * handler with its saved state and every answer so far. Unknown or foreign → TASK_NOT_FOUND.
   * `beforeResume` runs only then, after ownership was checked, just before the run starts.
   */
  async submitInput(
    ownerId: string,
    taskId: string,
    responses: Record<string, unknown>,
    beforeResume?: (task: TaskSnapshot) => void,
  ): Promise<MergeResult> {
    if (!isWellFormedTaskId(taskId)) throw TaskError.notFound();
    if (responses === null || typeof responses !== 'object' || Array.isArray(responses)) {
      throw new TaskError(TaskErrorCode.INVALID_ARGUMENT, 'inputResponses must be an object');
    }
    // Resumed here when a slot is free; otherwise back into the queue, for any instance with one.
    const here = this.claimer.tryReserve(taskId);
    let r: MergeResult | null;
    try {
      r = await this.repo.mergeInputResponses(ownerId, taskId, responses, {
        instanceId: here ? this.instances.instanceId : null,
        leaseMs: this.config.TASK_LEASE_MS,
      });
    } catch (err) {
      if (here) this.claimer.release(taskId);
      throw err;
    }
    const startsHere = here && r?.resumed === true && r.task.instanceId === this.instances.instanceId;
    if (here && !startsHere) this.claimer.release(taskId);
    if (!r) throw TaskError.notFound();
    linkActiveSpanToTask(r.task);
    if (r.expired) this.expiredHere(r.task);
    if (startsHere) {
      beforeResume?.(r.task);
      this.runner.start(r.task);
    }
    return r;
  }

  /**
   * Resolves as soon as the task is terminal (or gone), woken by the change notification from whichever
   * instance made it, with a re-read after a bus reconnect and a safety poll; also wakes at the task's
   * expiry. TASK_NOT_FOUND when it does not exist (for this owner) to begin with.
   */
  async waitForTerminal(
    ownerId: string,
    taskId: string,
    opts: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<WaitOutcome> {
    // A local timeout, measured on the monotonic clock (a wall-clock step must not end or stretch it).
    const deadline = performance.now() + (opts.timeoutMs ?? this.config.TASK_RESULT_TIMEOUT_MS);
    let last = await this.get(ownerId, taskId);
    for (;;) {
      if (isTerminal(last.status)) return { kind: 'terminal', task: last };
      const remaining = deadline - performance.now();
      if (remaining <= 0) return { kind: 'timeout', task: last };
      if (opts.signal?.aborted) return { kind: 'aborted', task: last };
      const woken = this.arm(taskId);
      try {
        // Re-read after arming, so a change committed in between is not missed.
        const now = await this.read(ownerId, taskId);
        if (!now) return { kind: 'gone' };
        last = now.task;
        if (isTerminal(last.status)) return { kind: 'terminal', task: last };
        // Time to expiry as the database sees it: the app clock may be skewed.
        const untilExpiry = Math.max(0, now.msUntilExpiry + 10);
        await woken.wait(Math.min(remaining, WAIT_SAFETY_POLL_MS, untilExpiry), opts.signal);
      } finally {
        woken.disarm();
      }
      const next = await this.read(ownerId, taskId);
      if (!next) return { kind: 'gone' };
      last = next.task;
    }
  }

  /**
   * Every task creation and status change, from any instance (delivered at commit). The payload carries ids
   * and status only: re-read with `get(change.ownerId, change.taskId)` to render it. `self` is true on the
   * instance that made the change, so exactly one instance can act on each change.
   */
  onTaskChanged(handler: (change: TaskChange, self: boolean) => void): () => void {
    return this.bus.subscribe(TASK_CHANNEL, (payload, meta) => {
      if (typeof payload.taskId !== 'string') return;
      handler(payload as unknown as TaskChange, meta.self);
    });
  }

  /** Called after the bus reconnected: changes may have been missed, so re-read what you track. */
  onResync(handler: () => void): () => void {
    return this.bus.onResync(handler);
  }

  /**
   * Runs `hook` inside every transaction that creates or changes a task's status, after the write, so what it
   * writes commits with the change or not at all. For outboxes; keep it short (it holds the task's lock).
   */
  onChangeInTransaction(hook: TaskChangeHook): void {
    this.repo.addChangeHook(hook);
  }

  /** The owner's tasks among `ids` with their change versions, read as they are (no lazy expiry). */
  async versioned(ownerId: string, ids: readonly string[]): Promise<VersionedTask[]> {
    return this.repo.findOwnedVersioned(ownerId, ids.filter(isWellFormedTaskId));
  }

  /** Which of these ids the owner holds, in the given order (for subscription acknowledgements). */
  async ownedIds(ownerId: string, taskIds: readonly string[]): Promise<string[]> {
    return this.repo.ownedIds(ownerId, taskIds.filter(isWellFormedTaskId));
  }

  /**
   * The task as the database clock sees it: a live task past created + ttl is expired on the spot. A
   * finished task read before its ttl ran out is answered from memory (see FinishedTaskCache).
   */
  private async read(
    ownerId: string,
    taskId: string,
  ): Promise<{ task: TaskSnapshot; msUntilExpiry: number } | null> {
    if (!isWellFormedTaskId(taskId)) return null;
    const cached = this.finished.get(ownerId, taskId);
    if (cached) return cached;
    // The owner's task's run here has returned and its outcome is committing: wait for that commit (a few
    // milliseconds; bounded, since a write retried through an outage can take much longer) and answer the
    // outcome. Anyone else's read goes straight to the database (where the task is not theirs) without
    // waiting, so its timing tells nothing about someone else's task.
    const writing = this.runner.outcomeInFlight(taskId, ownerId);
    if (writing) {
      await settledWithin(writing, OUTCOME_WAIT_MS);
      // A terminal state this instance just committed is what the database holds and will keep: the
      // outcome recorder put it in the finished-task cache before the wait ended, so the owner is answered
      // from there without reading it back.
      const hit = this.finished.get(ownerId, taskId);
      if (hit) return hit;
    }
    const startedAt = performance.now();
    const found = await this.repo.findOwnedClocked(ownerId, taskId);
    if (found && isTerminal(found.task.status)) this.finished.put(found.task, startedAt, found.msUntilExpiry);
    if (!found || !found.due) return found;
    const r = await this.repo.expireIfDue(ownerId, taskId);
    if (r?.applied) this.expiredHere(r.task);
    return r ? { task: r.task, msUntilExpiry: found.msUntilExpiry } : null;
  }

  /** This instance expired the task (on a read or a write): count it and stop its local run. */
  private expiredHere(task: TaskSnapshot): void {
    this.metrics.taskFinished(task, 'expired');
    this.runner.abortLocal(task.id, 'task expired');
  }

  private wake(taskId: string): void {
    const set = this.waiters.get(taskId);
    if (!set) return;
    for (const fn of [...set]) fn();
  }

  private arm(taskId: string): { wait(ms: number, signal?: AbortSignal): Promise<void>; disarm(): void } {
    let fired = false;
    let resolveFn: (() => void) | undefined;
    const fire = (): void => {
      fired = true;
      resolveFn?.();
    };
    let set = this.waiters.get(taskId);
    if (!set) {
      set = new Set();
      this.waiters.set(taskId, set);
    }
    set.add(fire);
    return {
      wait: (ms, signal) =>
        new Promise<void>((resolve) => {
          if (fired || signal?.aborted) return resolve();
          const done = (): void => {
            clearTimeout(timer);
            signal?.removeEventListener('abort', done);
            resolve();
          };
          const timer = setTimeout(done, ms);
          signal?.addEventListener('abort', done, { once: true });
          resolveFn = done;
        }),
      disarm: () => {
        set.delete(fire);
        if (set.size === 0 && this.waiters.get(taskId) === set) this.waiters.delete(taskId);
      },
    };
  }
}
