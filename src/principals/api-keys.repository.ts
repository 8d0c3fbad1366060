import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { IsNull, type Repository } from 'typeorm';
import { ApiKey } from './api-key.entity.js';

@Injectable()
export class ApiKeysRepository {
  constructor(@InjectRepository(ApiKey) private readonly repo: Repository<ApiKey>) {}

  async insert(row: Pick<ApiKey, 'id' | 'name' | 'secretSha256' | 'scopes'>): Promise<ApiKey> {
    const created: ApiKey = { ...row, createdAt: new Date(), revokedAt: null };
    await this.repo.insert(created);
    return created;
  }

  async findById(id: string): Promise<ApiKey | null> {
    return this.repo.findOneBy({ id });
  }

  async listAll(): Promise<ApiKey[]> {
    return this.repo.find({ order: { createdAt: 'ASC' } });
  }

  /** Marks a live key revoked; false when no such key exists or it was already revoked. */
  async revokeIfLive(id: string): Promise<boolean> {
    const result = await this.repo.update({ id, revokedAt: IsNull() }, { revokedAt: new Date() });
    return (result.affected ?? 0) > 0;
  }
}
