import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { McpSession } from './session.entity.js';

export interface SessionAdminFilter {
  principalId?: string;
  /** Include ended sessions (kept until SSE_EVENT_TTL_MS after their end). */
  includeEnded: boolean;
  limit: number;
}

/** Operator reads across all principals, for the admin CLI. Ending a session uses SessionsRepository.end. */
@Injectable()
export class SessionsAdminRepository {
  constructor(private readonly dataSource: DataSource) {}

  /** Most recently used first. */
  async list(filter: SessionAdminFilter): Promise<McpSession[]> {
    const q = this.dataSource.getRepository(McpSession).createQueryBuilder('s');
    if (filter.principalId !== undefined) q.andWhere('s.principal_id = :p', { p: filter.principalId });
    if (!filter.includeEnded) q.andWhere('s.ended_at IS NULL');
    return q.orderBy('s.last_seen_at', 'DESC').addOrderBy('s.id', 'ASC').limit(filter.limit).getMany();
  }
}
