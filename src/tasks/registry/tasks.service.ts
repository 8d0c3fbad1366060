import { ToolGates } from '../sharing/tool-gates.service.js';
import { Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { PgBusService } from '../../bus/pg-bus.service.js';
import { InstancesService } from '../../instances/instances.service.js';
import { linkActiveSpanToTask } from '../../telemetry/task-spans.js';
import { decodeCursor, encodeCursor, isWellFormedTaskId } from '../task-ids.js';
import { FinishedTaskCache } from './finished-task-cache.js';
import { isTerminal } from '../task-state.js';
import { TaskMetrics } from '../task-metrics.service.js';
import { TaskRunnerService } from '../execution/task-runner.service.js';
import type { TaskChange, TaskSnapshot, VersionedTask } from '../task.types.js';
import { TaskError, TaskErrorCode } from '../tasks.errors.js';
import { TASK_CHANNEL } from '../store/task-change-publisher.js';
import { TasksRepository, type MergeResult } from '../store/tasks.repository.js';
import { TasksConfig } from '../tasks.config.js';
import { TaskClaimer } from '../execution/task-claimer.service.js';

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
 * A task finished by a process that has no /metrics of its own (the admin CLI's cancel): that process names
 * one live server instance (`countedBy`), which counts it in mcp_tasks_finished_total, so every terminal
 * transition is counted once, somewhere.
 */
export const TASK_COUNTED_ELSEWHERE_CHANNEL = 'mcp_task_finished_uncounted';

/**
 * What an owner asks of a task, in both eras: read, list, cancel, answer its input, wait for it to end, and
 * hear of its changes. It speaks TaskSnapshot and TaskError, never JSON-RPC: rendering and error mapping
 * belong to the MCP face (tasks/mcp/). Creation is TaskCreationService's.
 */
@Injectable()
export class TasksService implements OnModuleInit, OnApplicationShutdown {
  private readonly waiters = new Map<string, Set<() => void>>();
  private offBus: (() => void) | undefined;
  private offResync: (() => void) | undefined;
  private offCounted: (() => void) | undefined;
  constructor(
    private readonly repo: TasksRepository,
    private readonly runner: TaskRunnerService,
    private readonly bus: PgBusService,
    private readonly instances: InstancesService,
    private readonly config: TasksConfig,
    private readonly metrics: TaskMetrics,
    private readonly claimer: TaskClaimer,
    /**
     * Finished tasks as their owners last read them or this instance committed them, until their ttl (they
     * never change before then). Shared with the outcome recorder, which fills it at the commit.
     */
    private readonly finished: FinishedTaskCache,
    private readonly gates: ToolGates,
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
        mustQueue: (tool) => this.gates.mustQueue(tool),
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
