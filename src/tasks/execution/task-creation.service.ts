import { Injectable } from '@nestjs/common';
import { UnstorableValueError } from '../../common/storable-text.js';
import { InstancesService } from '../../instances/instances.service.js';
import { QuotaService } from '../../quotas/quota.service.js';
import { QuotasConfig } from '../../quotas/quotas.config.js';
import { captureTraceContext } from '../../telemetry/trace-context.js';
import { TasksService } from '../registry/tasks.service.js';
import type { CreationLimits } from '../store/creation-limits.js';
import { TaskCreationRepository, type NewTask } from '../store/task-creation.repository.js';
import { newTaskId } from '../task-ids.js';
import { TaskMetrics, type CreationMode } from '../task-metrics.service.js';
import { pausedMessage, QUEUED_MESSAGE } from '../task-queue.js';
import type { TaskEra, TaskOutcome, TaskSnapshot } from '../task.types.js';
import { TaskError, TaskErrorCode } from '../tasks.errors.js';
import { TasksConfig } from '../tasks.config.js';
import { EscalationLink } from './escalation-link.js';
import { FinishedTaskCache } from '../registry/finished-task-cache.js';
import { TaskClaimer } from './task-claimer.service.js';
import { RetryableFailure } from './task-retry.js';
import { TaskRunnerService } from './task-runner.service.js';
import { UnresolvedLeases } from './unresolved-leases.js';
import { ToolGates } from '../sharing/tool-gates.service.js';

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

/** An Idempotency-Key and what makes a repeat "the same call". */
export interface TaskKey {
  idempotencyKey: string;
  /** Hash of the tool and arguments (never the ttl or _meta). */
  requestHash: string;
}

/**
 * Where a new task's work runs:
 * - `free-slot` (the default where this instance runs task work): leased here and started at once when a
 *   worker slot is free as its write goes, otherwise queued;
 * - `here`: leased here; the caller starts its run or adopts running work (the caller holds the slot);
 * - `queue`: queued for whichever instance has a free slot first (the default on INSTANCE_ROLE=web).
 */
export type TaskPlacement = 'free-slot' | 'here' | 'queue';

/** What varies between creations; the rest comes from the CreateTaskInput. */
export interface CreationSpec {
  placement?: TaskPlacement;
  /**
   * Named by an Idempotency-Key: created alone (never in a commit group), and a repeat from any instance gets
   * the key's task with `created: false`, nothing started. The key used with another call → IDEMPOTENCY_CONFLICT.
   */
  key?: TaskKey;
  /**
   * The work ended already (a required tool inside its inline window): created in its final state in one
   * write, never run; placement does not apply.
   */
  finished?: Exclude<TaskOutcome, { kind: 'input_required' }>;
  /** With `free-slot`: the run is not started; the caller adopts its work (the slot stays reserved for it). */
  adopt?: boolean;
  /** With `free-slot`: runs just before the run starts here. */
  beforeStart?: (task: TaskSnapshot) => void;
  /** An inline run given up for want of a slot: the id it had, the checkpoint it saved, its next attempt. */
  id?: string;
  checkpoint?: string | null;
  attempt?: number;
}

/** A creation's answer. */
export interface Creation {
  task: TaskSnapshot;
  /** False when the key already named a task: this call created and started nothing. */
  created: boolean;
  /** Leased to this instance: started (free-slot), or for the caller to start or adopt. */
  here: boolean;
}

/** How a modern call inside its inline window went (runInlineThenTask). */
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

/** How a modern call with an Idempotency-Key went (runInlineThenTask with a key). */
export type KeyedRunResult =
  /** The key already named a task (this call created nothing): answer from that task. */
  | { kind: 'repeat'; task: TaskSnapshot }
  /** Created, and its work ended inside the window with this outcome, recorded on `task` (as written). */
  | { kind: 'inline'; outcome: TaskOutcome; task: TaskSnapshot }
  /** Created, and it ended inside the window as `task` says (a worker elsewhere ran it, or it threw). */
  | { kind: 'finished'; task: TaskSnapshot }
  /** Created, and still running (or queued) when the window ran out: the CreateTaskResult. */
  | { kind: 'task'; task: TaskSnapshot };

/** Work run inside an inline window, given its abort signal and where its progress goes. */
export type InlineWork = (signal: AbortSignal, link: EscalationLink) => Promise<TaskOutcome>;

/** What ended an inline window first. */
type WindowEnd =
  | { kind: 'done'; outcome: TaskOutcome }
  | { kind: 'threw'; error: unknown }
  | { kind: 'window' }
  | { kind: 'aborted' };

/** The ttl a request is granted (TaskCreationService.grantTtl) against the given limits. */
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

/**
 * Task creation and where each task runs: `create` is the one way a task comes to exist (keyed or not,
 * leased here or queued, working or already finished), and `runInlineThenTask` the one inline window of a
 * 2026-07-28 call, which becomes a task when the window runs out. Both speak TaskSnapshot and TaskError.
 */
@Injectable()
export class TaskCreationService {
  constructor(
    private readonly creations: TaskCreationRepository,
    private readonly tasks: TasksService,
    private readonly runner: TaskRunnerService,
    private readonly claimer: TaskClaimer,
    private readonly instances: InstancesService,
    private readonly config: TasksConfig,
    private readonly quotasConfig: QuotasConfig,
    private readonly quotaService: QuotaService,
    private readonly metrics: TaskMetrics,
    private readonly finished: FinishedTaskCache,
    private readonly unresolved: UnresolvedLeases,
    private readonly gates: ToolGates,
  ) {}

  /**
   * The ttl a request is granted: its own clamped to TASK_MAX_TTL_MS, else TASK_DEFAULT_TTL_MS; when the
   * tool declares its longest run (`maxRunMs`) and the request asks for no ttl, that run plus
   * TASK_DEFAULT_TTL_MS (the retention after it), clamped too, so no default expires the task mid-run.
   */
  grantTtl(requested: number | null | undefined, maxRunMs?: number | null): number {
    return grantedTtlMs(this.config, requested, maxRunMs);
  }

  /**
   * Creates a task and commits it before returning, so a tasks/get right after (on any instance) finds it.
   * Throws LIMIT_EXCEEDED naming the limit, IDEMPOTENCY_CONFLICT for a key used with another call. See
   * CreationSpec for what varies.
   */
  async create(input: CreateTaskInput, spec: CreationSpec = {}): Promise<Creation> {
    if (!input.ownerId || !input.toolName) {
      throw new TaskError(TaskErrorCode.INVALID_ARGUMENT, 'ownerId and toolName are required');
    }
    if (spec.finished)
      return { task: await this.createFinished(input, spec.finished), created: true, here: false };
    const placement = spec.placement ?? (this.claimer.runsWork ? 'free-slot' : 'queue');
    if (placement === 'free-slot') {
      return spec.key ? this.keyedOnFreeSlot(input, spec.key, spec) : this.onFreeSlot(input, spec);
    }
    const row = this.newTask(input, placement === 'here', spec);
    if (spec.key) {
      // A repeat answers with the key's task, wherever that one runs.
      const made = await this.insertKeyed(input, row, spec.key);
      return { ...made, here: placement === 'here' && made.created };
    }
    const task = await this.creations.insertWithLimits(row, this.creationLimits());
    this.metrics.taskCreated(task.toolName, input.mode ?? 'immediate');
    return { task, created: true, here: placement === 'here' };
  }

  /**
   * 2026-07-28: runs `work` inline for the window (TASK_INLINE_WINDOW_MS unless given).
   *
   * Without a key: finished in time → its outcome, and no task exists. Not finished → the task is committed,
   * the running work is handed to the runner (outcome recorded, cancel aborts it, lease renewed) and the task
   * is returned. A refused creation (a limit) aborts the work and throws the TaskError. Work that throws a
   * RetryableFailure inside the window becomes a task too, queued for its retry. Checkpoints the work saved
   * inline are written on the task when it is created. With no slot here the work is not run inline at all:
   * the task is queued and answered inline if a worker ends it within the window.
   *
   * With a key: the call is a task from the start, so a repeat on any instance finds it. Created with a free
   * slot here → `work` runs as the task's run at once and the caller waits for the window: ended inside it →
   * the outcome, recorded before this returns, so a repeat gets the same answer; otherwise the task. The
   * caller leaving does not cancel the work: a client whose connection broke repeats the call and finds it.
   */
  runInlineThenTask(
    input: CreateTaskInput,
    work: InlineWork,
    opts: { windowMs?: number; signal?: AbortSignal; key: TaskKey },
  ): Promise<KeyedRunResult>;
  runInlineThenTask(
    input: CreateTaskInput,
    work: InlineWork,
    opts?: { windowMs?: number; signal?: AbortSignal },
  ): Promise<EscalationResult>;
  async runInlineThenTask(
    input: CreateTaskInput,
    work: InlineWork,
    opts: { windowMs?: number; signal?: AbortSignal; key?: TaskKey } = {},
  ): Promise<EscalationResult | KeyedRunResult> {
    const windowMs = opts.windowMs ?? this.config.TASK_INLINE_WINDOW_MS;
    if (opts.key) return this.keyedWindow(input, opts.key, work, windowMs, opts.signal);
    return this.inlineWindow(input, work, windowMs, opts.signal);
  }

  /** The one race of an inline window: the work ending, the window running out, or the caller leaving. */
  private async raceWindow(
    running: Promise<TaskOutcome>,
    windowMs: number,
    signal: AbortSignal | undefined,
    callerLeaves: 'aborted' | 'window',
  ): Promise<WindowEnd> {
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const end = await Promise.race<WindowEnd>([
      running.then(
        (outcome) => ({ kind: 'done' as const, outcome }),
        (error: unknown) => ({ kind: 'threw' as const, error }),
      ),
      new Promise<WindowEnd>((resolve) => {
        timer = setTimeout(() => resolve({ kind: 'window' }), windowMs);
        onAbort = () => resolve({ kind: callerLeaves });
        if (signal?.aborted) onAbort();
        else signal?.addEventListener('abort', onAbort, { once: true });
      }),
    ]);
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    return end;
  }

  /** runInlineThenTask without a key. */
  private async inlineWindow(
    input: CreateTaskInput,
    work: InlineWork,
    windowMs: number,
    signal: AbortSignal | undefined,
  ): Promise<EscalationResult> {
    // No slot here (web role, all busy, draining): the work is not run inline at all, since it could not be
    // kept once the window ran out. It is queued, and answered inline if a worker ends it within the window.
    if (!this.claimer.hasFreeSlot(input.toolName)) {
      const { task } = await this.create({ ...input, mode: 'escalated' }, { placement: 'queue' });
      return this.waitWithin(task, windowMs, signal);
    }
    const controller = new AbortController();
    const link = new EscalationLink((state) => this.quotaService.checkpointJson(state));
    const onCallerAbort = (): void => controller.abort(new Error('request closed'));
    signal?.addEventListener('abort', onCallerAbort, { once: true });
    const running = Promise.resolve().then(() => work(controller.signal, link));
    // Keep a rejection from surfacing as unhandled while it is not awaited yet.
    running.catch(() => undefined);
    const end = await this.raceWindow(running, windowMs, signal, 'aborted');
    if (end.kind === 'aborted') {
      controller.abort(new Error('request closed'));
      return { kind: 'aborted' };
    }
    signal?.removeEventListener('abort', onCallerAbort);
    if (end.kind === 'done') return { kind: 'inline', outcome: end.outcome };
    if (end.kind === 'threw' && !(end.error instanceof RetryableFailure)) throw end.error;
    // From here the task lives on independently of the request that started it.
    link.escalated = true;
    const id = newTaskId();
    // An inline call holds no slot; once it becomes a task it must. With none free (a burst of calls
    // escalating together) the inline run is given up and the task queued: it starts again on the first
    // free slot of any instance, and the bound TASK_WORKER_CONCURRENCY holds.
    const reserved = this.claimer.tryReserve(id, input.toolName);
    // A first attempt that failed has ended: all that is left of it is the re-queue for its retry (one
    // write, no work), so it is leased here even without a free slot, and the backoff is kept.
    const here = reserved || end.kind === 'threw';
    // Queued, the inline run is given up: it is fenced out before the row exists (a re-run may claim it at
    // commit), and the last checkpoint it saved is written with the row, which the re-run resumes from as
    // attempt 2 (the inline run was attempt 1; giving it up for want of a slot is not a failure).
    const given = here ? undefined : link.close();
    let task: TaskSnapshot;
    try {
      ({ task } = await this.create(
        { ...input, mode: 'escalated' },
        here
          ? { id, placement: 'here' }
          : { id, placement: 'queue', attempt: 2, checkpoint: given ? JSON.stringify(given.state) : null },
      ));
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
    if (end.kind === 'threw') {
      // The first attempt failed and will be retried: answer with the task as the re-queue left it (its
      // statusMessage names the attempt and when the next one runs).
      const written = await handle.done;
      return { kind: 'task', task: written?.task ?? task };
    }
    return { kind: 'task', task };
  }

  /** runInlineThenTask with a key. */
  private async keyedWindow(
    input: CreateTaskInput,
    key: TaskKey,
    work: InlineWork,
    windowMs: number,
    signal: AbortSignal | undefined,
  ): Promise<KeyedRunResult> {
    const made = await this.create(input, { key, placement: 'free-slot', adopt: true });
    if (!made.created) return { kind: 'repeat', task: made.task };
    if (!made.here) return this.waitWithin(made.task, windowMs, signal);
    const task = made.task;
    const controller = new AbortController();
    const link = new EscalationLink((state) => this.quotaService.checkpointJson(state));
    const running = Promise.resolve().then(() => work(controller.signal, link));
    link.attach(this.runner.adopt(task, controller, running));
    const recorded = this.runner.recordedOutcome(task.id);
    // The caller leaving ends its wait, not the work.
    const end = await this.raceWindow(running, windowMs, signal, 'window');
    if (end.kind === 'window' || end.kind === 'aborted') {
      link.escalated = true;
      return { kind: 'task', task };
    }
    // Ended (or threw: the recorder failed the task with the error): answer what was recorded.
    const written = await recorded;
    if (!written) return { kind: 'task', task };
    if (end.kind === 'done') return { kind: 'inline', outcome: end.outcome, task: written.task };
    return { kind: 'finished', task: written.task };
  }

  /** A queued task, answered from as it ended when a worker ends it within the window, else as it is. */
  private async waitWithin(
    task: TaskSnapshot,
    windowMs: number,
    signal?: AbortSignal,
  ): Promise<{ kind: 'finished' | 'task'; task: TaskSnapshot }> {
    if (windowMs <= 0) return { kind: 'task', task };
    const waited = await this.tasks.waitForTerminal(task.ownerId, task.id, { timeoutMs: windowMs, signal });
    if (waited.kind === 'terminal') return { kind: 'finished', task: waited.task };
    if (waited.kind === 'gone') return { kind: 'task', task };
    return { kind: 'task', task: waited.task };
  }

  /**
   * `free-slot` without a key: leased here when a slot is free as the row's write goes (its commit group is
   * sent), not when it starts waiting for the group. Under load a creation waits about a group's commit for
   * its turn, and slots reserved meanwhile run no work: with the default 16 slots, the reservations of the
   * creations in line queued most of a burst of short tasks.
   */
  private async onFreeSlot(input: CreateTaskInput, spec: CreationSpec): Promise<Creation> {
    const row = this.newTask(input, false, spec);
    let here = false;
    const place = (t: NewTask): void => {
      here = this.claimer.tryReserve(t.id, t.toolName);
      if (here) Object.assign(t, this.placementOf(input, true));
    };
    let task: TaskSnapshot;
    try {
      task = await this.creations.insertWithLimits(row, this.creationLimits(), place);
    } catch (err) {
      if (here) this.releaseFailed(row.id, err);
      throw err;
    }
    this.metrics.taskCreated(task.toolName, input.mode ?? 'immediate');
    if (here && !spec.adopt) this.start(task, input, spec);
    return { task, created: true, here };
  }

  /**
   * `free-slot` with a key: keyed creations run alone, so the slot is reserved for the one write. Only the
   * call that created the task starts it; a repeat gives the slot back.
   */
  private async keyedOnFreeSlot(input: CreateTaskInput, key: TaskKey, spec: CreationSpec): Promise<Creation> {
    const id = spec.id ?? newTaskId();
    const here = this.claimer.tryReserve(id, input.toolName);
    let made: { task: TaskSnapshot; created: boolean };
    try {
      made = await this.insertKeyed(input, this.newTask(input, here, { ...spec, id }), key);
    } catch (err) {
      if (here) this.releaseFailed(id, err);
      throw err;
    }
    if (!made.created) {
      if (here) this.claimer.release(id);
      return { ...made, here: false };
    }
    if (here && !spec.adopt) this.start(made.task, input, spec);
    return { ...made, here };
  }

  /** A creation that failed gives its slot back; its COMMIT answer may have been lost with the task leased here. */
  private releaseFailed(id: string, err: unknown): void {
    this.claimer.release(id);
    this.unresolved.afterFailedCreation(id, err, this.claimer);
  }

  private start(task: TaskSnapshot, input: CreateTaskInput, spec: CreationSpec): void {
    spec.beforeStart?.(task);
    this.runner.start(task, { principal: input.principal ?? null });
  }

  /** An Idempotency-Key's creation (TaskCreationRepository.insertKeyed), under the creation limits. */
  private async insertKeyed(
    input: CreateTaskInput,
    row: NewTask,
    key: TaskKey,
  ): Promise<{ task: TaskSnapshot; created: boolean }> {
    const r = await this.creations.insertKeyed(
      { ...row, idempotencyKey: key.idempotencyKey, requestHash: key.requestHash },
      this.creationLimits(),
    );
    if (r.requestHash !== key.requestHash) throw TaskError.idempotencyConflict(key.idempotencyKey);
    if (r.created) this.metrics.taskCreated(r.task.toolName, input.mode ?? 'immediate');
    return { task: r.task, created: r.created };
  }

  /**
   * A task whose work has ended already, written once in its final state (TaskCreationRepository's
   * insertFinished) and answered from the finished-task cache afterwards. An outcome PostgreSQL cannot store
   * takes the two-step path instead: created, then recorded by the runner, whose recorder fails the task
   * saying why.
   */
  private async createFinished(
    input: CreateTaskInput,
    outcome: Exclude<TaskOutcome, { kind: 'input_required' }>,
  ): Promise<TaskSnapshot> {
    const row = this.newTask(input, true, {});
    const finish =
      outcome.kind === 'completed'
        ? { status: 'completed' as const, result: outcome.result }
        : { status: 'failed' as const, error: outcome.error };
    let written;
    try {
      written = await this.creations.insertFinished(row, finish, this.creationLimits());
    } catch (err) {
      if (!(err instanceof UnstorableValueError)) throw err;
      // Already finished: it takes no slot, so it is leased here whatever the slots say.
      const { task } = await this.create(input, { placement: 'here' });
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
  private newTask(input: CreateTaskInput, here: boolean, spec: CreationSpec): NewTask {
    const args = input.requestParams?.arguments;
    const sharing = this.gates.queueFields(
      input.toolName,
      typeof args === 'object' && args !== null && !Array.isArray(args)
        ? (args as Record<string, unknown>)
        : undefined,
      input.ownerId,
      input.principal,
    );
    return {
      ...this.placementOf(input, here),
      ...sharing,
      id: spec.id ?? newTaskId(),
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
      checkpoint: spec.checkpoint ?? null,
      attempt: spec.attempt ?? 1,
    };
  }

  /** A new row's lease: to this instance (`here`), or none and the queued statusMessage. */
  private placementOf(input: CreateTaskInput, here: boolean): Pick<NewTask, 'instanceId' | 'statusMessage'> {
    return here
      ? { instanceId: this.instances.instanceId, statusMessage: input.statusMessage ?? null }
      : {
          instanceId: null,
          statusMessage: this.gates.isPaused(input.toolName) ? pausedMessage(input.toolName) : QUEUED_MESSAGE,
        };
  }

  private creationLimits(): CreationLimits {
    return {
      maxPerOwner: this.config.TASK_MAX_PER_OWNER,
      maxTotal: this.config.TASK_MAX_TOTAL,
      maxRetainedPerOwner: this.quotasConfig.QUOTA_RETAINED_TASKS_PER_OWNER,
    };
  }
}
