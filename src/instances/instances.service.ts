import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { BUILD_VERSION } from '../common/build-info.js';
import { InstancesRepository } from './instances.repository.js';
import { errorMessage } from '../common/error-message.js';
import { InstancesConfig } from './instances.config.js';

const HEARTBEAT_JOB = 'instance-heartbeat';

/** Registers this process in service_instance and keeps its heartbeat fresh. */
@Injectable()
export class InstancesService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(InstancesService.name);
  readonly instanceId = randomUUID();
  /** performance.now() of the last failed database call this process noted (heartbeat, lease renewal, janitor). */
  private lastDbErrorAt = -Infinity;

  constructor(
    private readonly repo: InstancesRepository,
    private readonly scheduler: SchedulerRegistry,
    private readonly config: InstancesConfig,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.register();
    const timer = setInterval(() => {
      this.beat().catch((err: unknown) => {
        this.noteDbError();
        this.logger.warn(`heartbeat failed: ${errorMessage(err)}`);
      });
    }, this.config.INSTANCE_HEARTBEAT_MS);
    timer.unref();
    this.scheduler.addInterval(HEARTBEAT_JOB, timer);
    this.logger.log(`instance ${this.instanceId} registered`);
  }

  private register(): Promise<void> {
    return this.repo.register({
      id: this.instanceId,
      hostname: hostname(),
      pid: process.pid,
      version: BUILD_VERSION,
      role: this.config.INSTANCE_ROLE,
    });
  }

  /** A heartbeat; a row the janitor pruned while this process could not reach the database is written again. */
  private async beat(): Promise<void> {
    if (await this.repo.heartbeat(this.instanceId)) return;
    await this.register();
    this.logger.warn(`instance ${this.instanceId} registered again (its row had been pruned as lapsed)`);
  }

  /** The other instances that are up: registered, not stopped, heartbeat within three intervals. */
  async otherLiveInstanceIds(): Promise<string[]> {
    const ids = await this.repo.liveIds(3 * this.config.INSTANCE_HEARTBEAT_MS);
    return ids.filter((id) => id !== this.instanceId);
  }

  /** A database call of this instance failed (an outage, a failover, a partition). */
  noteDbError(): void {
    this.lastDbErrorAt = performance.now();
  }

  /** Milliseconds since the last noted database failure (Infinity when none), on the monotonic clock. */
  msSinceDbError(): number {
    return performance.now() - this.lastDbErrorAt;
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.scheduler.doesExist('interval', HEARTBEAT_JOB)) this.scheduler.deleteInterval(HEARTBEAT_JOB);
    await this.repo.markStopped(this.instanceId).catch(() => undefined);
  }
}
