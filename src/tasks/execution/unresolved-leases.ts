import {
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { asActor } from '../../audit/audit-context.js';
import { PgBusService } from '../../bus/pg-bus.service.js';
import { errorMessage } from '../../common/error-message.js';
import { InstancesService } from '../../instances/instances.service.js';
import { requestContext } from '../../logging/request-context.js';
import { TaskRunnerService } from './task-runner.service.js';
import { TasksConfig } from '../tasks.config.js';
import { TaskError } from '../tasks.errors.js';
import type { TaskSnapshot } from '../task.types.js';
import { UnresolvedLeasesRepository, type LeaseFence } from '../store/unresolved-leases.repository.js';
import { UnresolvedWriteError } from '../store/unresolved-write.js';

/** Where a task this instance may run takes its worker slot (TaskClaimer). */
export interface SlotKeeper {
  tryReserve(taskId: string, toolName?: string): boolean;
  release(taskId: string): void;
}

/** The generation a task row is created at (the column's default). */
const CREATED_GENERATION = 1;
/** How often the outcome of a write still unresolved is asked for again. */
const RETRY_MS = 1000;
/**
 * Rounds in which PostgreSQL answered but could not say whether a claim committed (its transaction still
 * in progress there, or too old for pg_xact_status) before the claim is given up: its leases, if any,
 * lapse and the janitor deals with them as with any lapsed lease.
 */
const MAX_UNKNOWN_ROUNDS = 30;
/**
 * Rounds in which a creation's row was not found before it is taken not to have landed: a COMMIT still
 * being carried out when its answer was lost may show its row a moment later.
 */
const ABSENT_ROUNDS = 3;
/** At shutdown, how long giving back what is still unresolved may take (a database that does not answer). */
const SHUTDOWN_WAIT_MS = 3000;
/** Writes kept at most (an outage under load): past that, the oldest are left to the janitor. */
const MAX_PENDING = 10000;

/** A claim whose COMMIT answer was lost and whose outcome is not known yet. */
interface UnknownClaim {
  xact: string;
  fences: LeaseFence[];
  unknownRounds: number;
}

/** A row that may be leased here by such a write, and how many rounds found no row for it. */
interface Fenced {
  generation: number;
  /** Rounds without a row tolerated before it is dropped (a committed claim's rows exist: 0). */
  absentTolerance: number;
  absentRounds: number;
}

/**
 * The leases this instance may have taken by a write whose COMMIT answer was lost while PostgreSQL was out
 * of reach: a claim (TaskClaimer) or a creation placed here (TasksService). Such a write's rows, if it
 * landed, are leased to this instance but run by nobody: without this, their leases lapsed and the janitor
 * failed ordinary tasks "worker lost" (resumable ones lost an attempt) though they never ran, and a repeat
 * of a keyed creation found a task that nothing would start.
 *
 * Once PostgreSQL answers again (retried every RETRY_MS, and at once on a bus reconnect), a claim's
 * outcome is asked for by its transaction id (pg_xact_status); a creation's row by its id, which the
 * creation minted. What landed and is still leased here at the generation that write gave it (the fence:
 * nothing else can leave a row there) is locked and settled: started here while a worker slot is free and
 * the instance is not draining (its lease renewed), otherwise given back to the queue unchanged (same
 * attempt, no failure counted) for any instance to claim. Only this instance's own leases are touched,
 * under row locks, and a settle that cannot be confirmed is run again, finding its own work by the same
 * fence.
 */
@Injectable()
export class UnresolvedLeases implements OnModuleInit, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger(UnresolvedLeases.name);
  private readonly claims: UnknownClaim[] = [];
  private readonly fenced = new Map<string, Fenced>();
  private slots: SlotKeeper | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The round in progress, if any. */
  private current: Promise<void> | undefined;
  private again = false;
  /** Shutting down: nothing more is started here; what landed goes back to the queue. */
  private closing = false;
  private stopped = false;
  private offResync: (() => void) | undefined;

  constructor(
    private readonly repo: UnresolvedLeasesRepository,
    private readonly runner: TaskRunnerService,
    private readonly instances: InstancesService,
    private readonly bus: PgBusService,
    private readonly config: TasksConfig,
  ) {}

  onModuleInit(): void {
    this.offResync = this.bus.onResync(() => {
      if (this.pending > 0) void this.resolveNow();
    });
  }

  /** What is still unresolved is given back to the queue rather than left for its lease to lapse. */
  async beforeApplicationShutdown(): Promise<void> {
    this.closing = true;
    if (this.pending === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.resolveNow(),
      new Promise<void>((r) => {
        timer = setTimeout(r, SHUTDOWN_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
  }

  onApplicationShutdown(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.offResync?.();
  }

  /** Writes whose leases are still to be resolved (claims of unknown outcome, and fenced rows). */
  get pending(): number {
    return this.claims.length + this.fenced.size;
  }

  /**
   * A claim failed with `err`: when its COMMIT answer was lost and its outcome is still unknown
   * (UnresolvedWriteError carrying the tasks it would have claimed), its leases are resolved later.
   */
  afterFailedClaim(err: unknown, slots: SlotKeeper): void {
    if (!(err instanceof UnresolvedWriteError) || !Array.isArray(err.ifLanded)) return;
    const fences = (err.ifLanded as { task: TaskSnapshot }[]).map(({ task }) => ({
      taskId: task.id,
      generation: task.generation,
    }));
    if (fences.length === 0) return;
    this.slots = slots;
    this.claims.push({ xact: err.xact, fences, unknownRounds: 0 });
    this.trim();
    this.schedule();
  }

  /**
   * A creation that would have leased task `taskId` to this instance failed with `err`: unless the
   * database refused it outright (a TaskError: a limit, a conflict, a lock wait), it may have landed, and
   * its row is looked for later.
   */
  afterFailedCreation(taskId: string, err: unknown, slots: SlotKeeper): void {
    if (err instanceof TaskError) return;
    this.slots = slots;
    this.fenced.set(taskId, {
      generation: CREATED_GENERATION,
      absentTolerance: ABSENT_ROUNDS,
      absentRounds: 0,
    });
    this.trim();
    this.schedule();
  }

  /** Runs a round now (or once more after the one running); settles when the rounds end. */
  resolveNow(): Promise<void> {
    if (this.current) {
      this.again = true;
      return this.current;
    }
    clearTimeout(this.timer);
    this.timer = undefined;
    // A round started from a request's failure must not lend it that request's id and principal: its writes
    // and the runs it starts are the worker's.
    this.current = requestContext.exit(() =>
      asActor({ kind: 'worker' }, async () => {
        try {
          do {
            this.again = false;
            await this.round();
          } while (this.again && !this.stopped);
        } catch (err) {
          // A lock wait that timed out (TASK_BUSY) is no database fault; the next round tries again.
          if (!(err instanceof TaskError)) this.instances.noteDbError();
          this.logger.debug?.(`unresolved leases not settled yet: ${errorMessage(err)}`);
        } finally {
          this.current = undefined;
          this.schedule();
        }
      }),
    );
    return this.current;
  }

  private schedule(): void {
    if (this.stopped || this.timer || this.current || this.pending === 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.resolveNow();
    }, RETRY_MS);
    this.timer.unref();
  }

  /** One round: each claim's outcome asked for, then every fenced row settled. Throws while unreachable. */
  private async round(): Promise<void> {
    if (this.stopped) return;
    for (const claim of [...this.claims]) {
      const status = await this.repo.xactStatus(claim.xact);
      if (status === 'committed' || status === 'aborted' || ++claim.unknownRounds >= MAX_UNKNOWN_ROUNDS) {
        this.claims.splice(this.claims.indexOf(claim), 1);
      }
      if (status === 'committed') {
        for (const f of claim.fences) {
          this.fenced.set(f.taskId, { generation: f.generation, absentTolerance: 0, absentRounds: 0 });
        }
      } else if (status !== 'aborted' && claim.unknownRounds >= MAX_UNKNOWN_ROUNDS) {
        this.logger.warn(
          `the claim of ${claim.fences.length} task(s) in transaction ${claim.xact} stayed unresolved; ` +
            'their leases, if it committed, lapse',
        );
      }
    }
    if (this.fenced.size === 0 || this.stopped) return;
    await this.settle();
  }

  private async settle(): Promise<void> {
    const fences = [...this.fenced].map(([taskId, f]) => ({ taskId, generation: f.generation }));
    const slots = this.slots;
    const reserved = new Set<string>();
    let settled;
    try {
      settled = await this.repo.settle(
        this.instances.instanceId,
        fences,
        this.config.TASK_LEASE_MS,
        (task) => {
          if (this.closing || this.stopped || !slots?.tryReserve(task.id, task.toolName)) return false;
          reserved.add(task.id);
          return true;
        },
      );
    } catch (err) {
      for (const id of reserved) slots?.release(id);
      throw err;
    }
    for (const { taskId } of fences) {
      const f = this.fenced.get(taskId);
      if (f && settled.absent.has(taskId) && ++f.absentRounds <= f.absentTolerance) continue;
      this.fenced.delete(taskId);
    }
    const kept = new Set(settled.kept.map((k) => k.task.id));
    for (const id of reserved) if (!kept.has(id)) slots?.release(id);
    for (const k of settled.kept) {
      this.runner.start(k.task, { checkpoint: k.checkpoint, principal: k.principal });
    }
    if (settled.kept.length + settled.released.length > 0) {
      this.logger.log(
        `a write whose COMMIT answer was lost had leased ${settled.kept.length + settled.released.length} ` +
          `task(s) here: ${settled.kept.length} started, ${settled.released.length} given back to the queue`,
      );
    }
  }

  /** Keeps at most MAX_PENDING writes, dropping the oldest (their leases lapse and the janitor rescues their tasks). */
  private trim(): void {
    while (this.pending > MAX_PENDING) {
      if (this.claims.length > 0) this.claims.shift();
      else this.fenced.delete(this.fenced.keys().next().value as string);
    }
  }
}
