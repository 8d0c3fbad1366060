import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { IsNull, type Repository } from 'typeorm';
import { ServiceInstance } from './service-instance.entity.js';

@Injectable()
export class InstancesRepository {
  constructor(@InjectRepository(ServiceInstance) private readonly repo: Repository<ServiceInstance>) {}

  async register(row: Pick<ServiceInstance, 'id' | 'hostname' | 'pid' | 'version'>): Promise<void> {
    const now = new Date();
    await this.repo.insert({ ...row, startedAt: now, heartbeatAt: now, stoppedAt: null });
  }

  async heartbeat(id: string): Promise<void> {
    await this.repo.update({ id, stoppedAt: IsNull() }, { heartbeatAt: new Date() });
  }

  async markStopped(id: string): Promise<void> {
    await this.repo.update({ id }, { stoppedAt: new Date() });
  }

  async findById(id: string): Promise<ServiceInstance | null> {
    return this.repo.findOneBy({ id });
  }
}
