import {
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { asActor } from '../../audit/audit-context.js';
import { PgBusService } from '../../bus/pg-bus.service.js';
import { errorMessage } from '../../common/error-message.js';
import { InstancesConfig } from '../../instances/instances.config.js';
import { InstancesService } from '../../instances/instances.service.js';
import { LifecycleService } from '../../lifecycle/lifecycle.service.js';
import { requestContext } from '../../logging/request-context.js';
import { TaskMetrics } from '../task-metrics.service.js';
import { queuedNotice, TASK_QUEUE_CHANNEL } from '../task-queue.js';
import { TaskQueueRepository } from '../store/task-queue.repository.js';
import { ToolGates } from '../sharing/tool-gates.service.js';
import { QueueSharingMetrics } from '../sharing/queue-sharing.metrics.js';
import { TaskRunnerService } from './task-runner.service.js';
import { TasksConfig } from '../tasks.config.js';
import { UnresolvedLeases } from './unresolved-leases.js';

/**
 * A slot held for a task this instance decided to run before its run is registered (a creation leased to
 * itself is committing): given back when the run starts, or after this long if it never does.
 */
const RESERVATION_MS = 60000;

/** Claim statements one wake may run at most (each takes every free slot; a full claim asks again). */
const MAX_CLAIMS_PER_WAKE = 64;

/**
 * Claims queued task work for this instance and runs it, within TASK_WORKER_CONCURRENCY slots.
 *
 * - Slots: a run of this instance (TaskRunnerService: started, claimed, or adopted after a 2026-07-28
 *   call's inline window ran out) holds one until its work returns (TaskRunnerService.slotsHeld: while its
 *   outcome is written the slot is free, up to as many such writes as slots). A call still inside its inline
 *   window holds none. A creation that decided to lease its task to this instance holds one from the
 *   decision (tryReserve) until its run starts, so concurrent creations cannot all take the last slot.
 * - Wakes: a TASK_QUEUE_CHANNEL notice (at once when due, else one timer for the earliest future
 *   available_at), a local run giving its slot back while the queue may hold work, a bus reconnect, and a
 *   safety poll every TASK_CLAIM_POLL_MS. One claim loop runs at a time; a wake during it runs it again.
 * - Never once the drain is announced (SIGTERM: resumable runs are being handed over to the queue, and this
 *   instance must not take them back), and never on INSTANCE_ROLE=web (its slots are 0).
 */
@Injectable()
export class TaskClaimer
  implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown
{
  private readonly logger = new Logger(TaskClaimer.name);
  /** Creations leased to this instance whose run has not started yet, with when they were decided. */
  private readonly reserved = new Map<string, number>();
  /** Slots a claim statement in flight may fill. */
  private claimingSlots = 0;
  private looping = false;
  private again = false;
  /** The queue may hold claimable work (a notice since the last claim that came back short). */
  private backlog = true;
  /** Bumped by every notice: a short claim clears `backlog` only if no notice came in meanwhile. */
  private notices = 0;
  /**
   * Tasks announced claimable now (a due notice each) and not yet claimed here, and whether more may wait
   * than that (after boot, a resync, a timer, or a poll that found ready work). A claim holds the slots it
   * asks for during its round trip, and a creation finding none free is queued: a claim asking for every
   * free slot on each notice queued the creations arriving meanwhile, whose notices asked again, so under
   * steady load half the tasks would go through the queue. A notice-driven claim
   * asks for the announced tasks only.
   */
  private announced = 0;
  private unknownBacklog = true;
  private timer: { handle: NodeJS.Timeout; at: number } | undefined;
  private poll: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly offs: (() => void)[] = [];

  constructor(
    private readonly queue: TaskQueueRepository,
    private readonly runner: TaskRunnerService,
    private readonly bus: PgBusService,
    private readonly lifecycle: LifecycleService,
    private readonly instances: InstancesService,
    private readonly config: TasksConfig,
    private readonly instancesConfig: InstancesConfig,
    private readonly metrics: TaskMetrics,
    private readonly unresolved: UnresolvedLeases,
    private readonly gates: ToolGates,
    private readonly sharingMetrics: QueueSharingMetrics,
  ) {}

  /** Whether this instance's role runs task work at all (INSTANCE_ROLE all or worker). */
  get runsWork(): boolean {
    return this.instancesConfig.runsTaskWork;
  }

  /** The slots this instance runs task work in: TASK_WORKER_CONCURRENCY, or 0 when its role is web. */
  get capacity(): number {
    return this.instancesConfig.runsTaskWork ? this.config.TASK_WORKER_CONCURRENCY : 0;
  }

  /** Busy and free slots now (the gauge mcp_task_worker_slots): none is free while draining. */
  slots(): { busy: number; free: number } {
    const busy = this.busy();
    return { busy, free: this.mayRun() ? Math.max(0, this.capacity - busy) : 0 };
  }

  /**
   * Takes a slot for a task of `toolName` this instance is about to lease to itself (creation, resume), if it
   * runs work, is not draining and has one free, and the tool is behind no gate (limits, a pause: its runs
   * start through the claim, which applies them). The slot is held until the task's run starts (or
   * `release`).
   */
  tryReserve(taskId: string, toolName?: string): boolean {
    if ((toolName !== undefined && this.gates.mustQueue(toolName)) || this.slots().free <= 0) return false;
    this.reserved.set(taskId, performance.now());
    return true;
  }

  /** Gives back a reservation whose task will not run here (its creation failed, or it was queued). */
  release(taskId: string): void {
    // The slot is free again: worth a claim only while the queue may hold work.
    if (this.reserved.delete(taskId) && this.backlog) this.wake();
  }

  /** Whether a new task of `toolName` would get a slot here right now (a read: reserves nothing). */
  hasFreeSlot(toolName: string): boolean {
    return !this.gates.mustQueue(toolName) && this.slots().free > 0;
  }

  onModuleInit(): void {
    this.metrics.watchQueue({ depth: () => this.queue.depth(), slots: () => this.slots() });
    if (!this.instancesConfig.runsTaskWork) return;
    this.offs.push(
      this.bus.subscribe(TASK_QUEUE_CHANNEL, (payload) => {
        const notice = queuedNotice(payload);
        if (!notice) return;
        this.notices++;
        this.backlog = true;
        const inMs = notice.availableAtMs - Date.now();
        if (inMs <= 0) {
          this.announced += notice.count;
          this.wake();
        } else this.armTimer(inMs);
      }),
      // Notices may have been missed: look at the queue (a blind claim would hold every free slot for its
      // round trip and queue the creations arriving meanwhile, even when nothing waits).
      this.bus.onResync(() => void this.armFromQueue(true)),
      this.runner.onRunStarted((taskId) => this.reserved.delete(taskId)),
      this.runner.onSlotFreed(() => {
        if (this.backlog) this.wake();
      }),
      this.runner.onRunEnded((tool) => this.gates.runEnded(tool)),
      this.lifecycle.onDrainAnnounced(() => this.clearTimer()),
    );
  }

  onApplicationBootstrap(): void {
    if (!this.instancesConfig.runsTaskWork) return;
    this.poll = setInterval(() => void this.safetyPoll(), this.config.TASK_CLAIM_POLL_MS);
    this.poll.unref();
    // Work queued while no worker had room (or none was up) is claimed as soon as this instance is up. The
    // queue is read first: a claim holds the free slots while in flight, and one made blindly at boot would
    // queue the first creations behind an empty queue.
    void this.armFromQueue(true);
  }

  beforeApplicationShutdown(): void {
    this.stop();
  }

  onApplicationShutdown(): void {
    this.stop();
  }

  /** Runs the claim loop now (or once more after the one running). */
  wake(): void {
    if (!this.mayRun()) return;
    if (this.looping) {
      this.again = true;
      return;
    }
    this.looping = true;
    // A wake from inside a request (a creation giving its slot back) must not lend that request's id and
    // principal to the claims and runs that follow: they are the worker's (audit trail, log correlation).
    void requestContext.exit(() =>
      asActor({ kind: 'worker' }, () =>
        this.claimLoop().finally(() => {
          this.looping = false;
        }),
      ),
    );
  }

  private mayRun(): boolean {
    return this.instancesConfig.runsTaskWork && !this.stopped && !this.lifecycle.drainAnnounced;
  }

  private busy(): number {
    const now = performance.now();
    for (const [id, at] of this.reserved) {
      if (now - at > RESERVATION_MS) this.reserved.delete(id);
    }
    return this.runner.slotsHeld + this.reserved.size + this.claimingSlots;
  }

  private async claimLoop(): Promise<void> {
    do {
      this.again = false;
      for (let i = 0; i < MAX_CLAIMS_PER_WAKE && this.mayRun(); i++) {
        const free = this.slots().free;
        if (free <= 0) break;
        const seen = this.notices;
        const want = this.unknownBacklog ? free : Math.min(free, this.announced);
        if (want <= 0) {
          this.backlog = false;
          break;
        }
        this.unknownBacklog = false;
        const before = this.announced;
        const got = await this.claimInto(want);
        // What was announced before the claim is claimed here or, when it came back short, was taken by
        // another instance (or is no longer claimable); what was announced during it still waits.
        const during = this.announced - before;
        this.announced = got < want ? during : Math.max(0, this.announced - got);
        if (got < want) {
          if (seen === this.notices) this.backlog = false;
          break;
        }
      }
    } while (this.again && this.mayRun());
  }

  /** One claim of up to `n` tasks, each started at once; how many it got (0 on a database error). */
  private async claimInto(n: number): Promise<number> {
    this.claimingSlots += n;
    let claimed;
    try {
      claimed = await this.queue.claim(
        this.instances.instanceId,
        n,
        this.config.TASK_LEASE_MS,
        this.gates.limitsOf,
        this.runner.endedUnwritten(),
      );
    } catch (err) {
      this.instances.noteDbError();
      this.logger.warn(`claiming queued tasks failed: ${errorMessage(err)}`);
      // A claim whose COMMIT answer was lost may have leased tasks here: they are run or given back later.
      this.unresolved.afterFailedClaim(err, this);
      return 0;
    } finally {
      this.claimingSlots -= n;
    }
    for (const c of claimed) {
      this.runner.start(c.task, { checkpoint: c.checkpoint, principal: c.principal });
    }
    this.metrics.claimed(claimed.map((c) => c.waitedMs));
    this.sharingMetrics.claimed(claimed.map((c) => ({ tool: c.task.toolName, waitedMs: c.waitedMs })));
    return claimed.length;
  }

  /** Claims what a missed notice left, and (re)arms the timer for the earliest delayed task. */
  private async safetyPoll(): Promise<void> {
    if (!this.mayRun()) return;
    if (this.slots().free <= 0) {
      // Nothing to claim into; a run giving its slot back claims what waits.
      this.backlog = true;
      this.unknownBacklog = true;
      return;
    }
    await this.armFromQueue(true);
  }

  /**
   * Reads the queue by the database clock: arms the timer for the earliest delayed task and, with
   * `claimReady`, claims when something is ready. It reads before it claims: an empty claim would hold every
   * free slot for its round trip, and queue the creations arriving meanwhile.
   */
  private async armFromQueue(claimReady = false): Promise<void> {
    if (!this.mayRun()) return;
    try {
      const depth = await this.queue.depth();
      if (claimReady && depth.ready > 0) {
        this.backlog = true;
        this.unknownBacklog = true;
        this.wake();
      } else if (claimReady) {
        // Nothing was ready when read: from here the notices alone say what there is to claim.
        this.unknownBacklog = false;
      }
      if (depth.nextDelayedInMs !== null) this.armTimer(depth.nextDelayedInMs);
    } catch (err) {
      this.logger.debug?.(`queue depth not read: ${errorMessage(err)}`);
      this.backlog = true;
      this.unknownBacklog = true;
      this.wake();
    }
  }

  /** One timer only, for the earliest time anything queued becomes claimable. */
  private armTimer(inMs: number): void {
    if (!this.mayRun()) return;
    const at = performance.now() + inMs;
    if (this.timer && this.timer.at <= at) return;
    this.clearTimer();
    const handle = setTimeout(
      () => {
        this.timer = undefined;
        this.backlog = true;
        this.unknownBacklog = true;
        this.wake();
        // The one timer was the earliest; the next delayed task (whose own notice may have been replaced by
        // an earlier one) is found in the queue, by the database clock.
        void this.armFromQueue();
      },
      Math.max(0, Math.ceil(inMs)),
    );
    handle.unref();
    this.timer = { handle, at };
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer.handle);
    this.timer = undefined;
  }

  private stop(): void {
    this.stopped = true;
    this.clearTimer();
    clearInterval(this.poll);
    for (const off of this.offs.splice(0)) off();
  }
}
