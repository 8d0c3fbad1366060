import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import type { Repository } from 'typeorm';
import { ServiceInstance } from './service-instance.entity.js';

@Injectable()
export class InstancesRepository {
  constructor(@InjectRepository(ServiceInstance) private readonly repo: Repository<ServiceInstance>) {}

  // Every timestamp here is the database's now(): the janitor judges heartbeats against the same clock, so
  // an app host whose clock is off can neither look dead nor keep a dead instance looking alive.

  async register(row: Pick<ServiceInstance, 'id' | 'hostname' | 'pid' | 'version' | 'role'>): Promise<void> {
    await this.repo.insert({
      ...row,
      startedAt: () => 'now()',
      heartbeatAt: () => 'now()',
      stoppedAt: null,
    });
  }

  /**
   * Refreshes the heartbeat; false when the row is gone (the janitor pruned it after a long silence). A row
   * the janitor marked lapsed (stopped_at set to its last heartbeat: the process looked dead) is live again,
   * since the process is evidently running; a row stopped by its own shutdown (stopped_at later than its last
   * heartbeat) stays stopped.
   */
  async heartbeat(id: string): Promise<boolean> {
    const [, affected] = await this.repo.query<[unknown[], number]>(
      `UPDATE service_instance SET heartbeat_at = now(), stopped_at = NULL
        WHERE id = $1 AND (stopped_at IS NULL OR stopped_at = heartbeat_at)`,
      [id],
    );
    if (affected > 0) return true;
    const [row] = await this.repo.query<{ id: string }[]>('SELECT id FROM service_instance WHERE id = $1', [
      id,
    ]);
    return row !== undefined;
  }

  async markStopped(id: string): Promise<void> {
    await this.repo.update({ id }, { stoppedAt: () => 'now()' });
  }

  /** Instances not stopped whose heartbeat is younger than `staleMs` (database clock). */
  async liveIds(staleMs: number): Promise<string[]> {
    const rows = await this.repo.query<{ id: string }[]>(
      `SELECT id FROM service_instance
        WHERE stopped_at IS NULL AND heartbeat_at > now() - make_interval(secs => $1::float8 / 1000)`,
      [staleMs],
    );
    return rows.map((r) => r.id);
  }

  async findById(id: string): Promise<ServiceInstance | null> {
    return this.repo.findOneBy({ id });
  }
}
