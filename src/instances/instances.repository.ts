import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { IsNull, type Repository } from 'typeorm';
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

  async heartbeat(id: string): Promise<void> {
    await this.repo.update({ id, stoppedAt: IsNull() }, { heartbeatAt: () => 'now()' });
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
