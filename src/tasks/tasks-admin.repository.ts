import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { LIVE_SQL, toNumber, type Row } from './task-sql.js';
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
 * Operator reads across all owners: the admin CLI's listings, and the live-task gauge (TaskMetrics). The
 * server's own reads stay owner-scoped in TasksRepository. The CLI's writes (cancel, retry) go through
 * TasksRepository and TaskCreationRepository so they take the same row locks, check the same creation
 * limits and send the same notifications as the server.
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

  /**
   * The tasks `tasks retry` created from this one (redriven_from), oldest first. Unindexed: an operator's
   * one-off read, never on a request path.
   */
  async redrivenAs(id: string): Promise<string[]> {
    const rows = await this.dataSource.query<Row[]>(
      `SELECT id FROM task WHERE redriven_from = $1 ORDER BY created_at, id`,
      [id],
    );
    return rows.map((r) => r.id as string);
  }

  /** Live tasks by status, for the mcp_tasks_active gauge. */
  async countLiveByStatus(): Promise<Record<string, number>> {
    const rows = await this.dataSource.query<Row[]>(
      `SELECT status, count(*) AS n FROM task WHERE status IN ${LIVE_SQL} GROUP BY status`,
    );
    const out: Record<string, number> = { working: 0, input_required: 0 };
    for (const r of rows) out[r.status as string] = toNumber(r.n);
    return out;
  }
}
