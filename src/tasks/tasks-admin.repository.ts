import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { TaskStatus } from './task-state.js';
import { Task } from './task.entity.js';

export interface TaskAdminFilter {
  ownerId?: string;
  statuses?: readonly TaskStatus[];
  toolName?: string;
  /** Only tasks created before this moment (`--older-than`). */
  createdBefore?: Date;
  /** Only tasks created after this moment (`--newer-than`). */
  createdAfter?: Date;
  limit: number;
}

/**
 * Operator reads across all owners, for the admin CLI; the server's own paths stay owner-scoped in
 * TasksRepository. Writes (cancel) go through TasksRepository so they take the same row locks and send the
 * same notifications as the server.
 */
@Injectable()
export class TasksAdminRepository {
  constructor(private readonly dataSource: DataSource) {}

  /** Newest first. */
  async list(filter: TaskAdminFilter): Promise<Task[]> {
    const q = this.dataSource.getRepository(Task).createQueryBuilder('t');
    if (filter.ownerId !== undefined) q.andWhere('t.owner_id = :owner', { owner: filter.ownerId });
    if (filter.statuses?.length) q.andWhere('t.status IN (:...statuses)', { statuses: [...filter.statuses] });
    if (filter.toolName !== undefined) q.andWhere('t.tool_name = :tool', { tool: filter.toolName });
    if (filter.createdBefore) q.andWhere('t.created_at < :before', { before: filter.createdBefore });
    if (filter.createdAfter) q.andWhere('t.created_at > :after', { after: filter.createdAfter });
    return q.orderBy('t.created_at', 'DESC').addOrderBy('t.id', 'DESC').limit(filter.limit).getMany();
  }

  async findById(id: string): Promise<Task | null> {
    return this.dataSource.getRepository(Task).findOneBy({ id });
  }
}
