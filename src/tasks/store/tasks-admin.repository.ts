import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { LIVE_SQL, rowToConsoleTask, TERMINAL_SQL, toNumber, type Row } from './task-row.mapper.js';
import type { TaskStatus } from '../task-state.js';
import { Task } from '../task.entity.js';
import type { TaskEra, TaskErrorPayload } from '../task.types.js';

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

/** The console's task list filter (/admin/tasks); every field optional, all of them ANDed. */
export interface ConsoleTaskFilter {
  status?: TaskStatus;
  toolName?: string;
  ownerId?: string;
  instanceId?: string;
  createdBefore?: Date;
  createdAfter?: Date;
}

/** A keyset position in the console's task list (created_at DESC, id DESC): the last row shown. */
export interface ConsoleTaskPosition {
  createdAt: Date;
  id: string;
}

/** One line of the console's task list. */
export interface ConsoleTaskRow {
  id: string;
  ownerId: string;
  ownerName: string | null;
  toolName: string;
  era: TaskEra;
  status: TaskStatus;
  statusMessage: string | null;
  createdAt: Date;
  lastUpdatedAt: Date;
  instanceId: string | null;
  attempt: number;
}

/** A status count on the console; `atLeast` when the count stopped at its bound. */
export interface ConsoleStatusCount {
  status: TaskStatus;
  count: number;
  atLeast: boolean;
}

/** A task as the console's task page shows it: sizes and a bounded preview instead of the stored payloads. */
export interface ConsoleTaskDetail extends ConsoleTaskRow {
  sessionId: string | null;
  expiresAt: Date;
  leaseExpiresAt: Date | null;
  availableAt: Date | null;
  failedAttempts: number;
  maxAttempts: number;
  resumable: boolean;
  idempotencyKey: string | null;
  error: TaskErrorPayload | null;
  lastError: TaskErrorPayload | null;
  traceparent: string | null;
  redrivenFrom: string | null;
  resultBytes: number | null;
  resultIsError: boolean | null;
  checkpointBytes: number | null;
  /** The checkpoint as indented JSON, cut at the preview length asked for. */
  checkpointPreview: string | null;
}

/** What is waiting for the janitor, each count bounded (`atLeast` when it hit the bound). */
export interface ConsoleJanitorBacklog {
  dueToExpire: ConsoleCount;
  dueToDelete: ConsoleCount;
  queued: ConsoleCount;
  leaseLapsed: ConsoleCount;
}

export interface ConsoleCount {
  count: number;
  atLeast: boolean;
}

const CONSOLE_ROW_COLUMNS = `id, owner_id, principal->>'name' AS owner_name, tool_name, era, status, status_message,
       created_at, last_updated_at, instance_id, attempt`;

const nullableNumber = (v: unknown): number | null => (v === null || v === undefined ? null : toNumber(v));

/** count(*) of a subquery cut at `bound` + 1 rows: the scan stops there however large the table is. */
function bounded(n: unknown, bound: number): ConsoleCount {
  const count = toNumber(n);
  return count > bound ? { count: bound, atLeast: true } : { count, atLeast: false };
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
   * The tasks `tasks retry` created from this one (redriven_from), oldest first (task_redriven_from_idx,
   * which the console's task page needs too).
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

  /*
   * The console's reads (/admin). Each is one statement with a LIMIT (or a bounded count): the console must
   * answer in well under a second with millions of finished rows. Pagination is by keyset, never OFFSET.
   */

  /**
   * One page of the console's task list, newest first, after `after` (the last row of the previous page).
   * Returns up to `limit` + 1 rows: the extra one only says that a next page exists.
   */
  async consoleTasks(
    filter: ConsoleTaskFilter,
    after: ConsoleTaskPosition | undefined,
    limit: number,
  ): Promise<ConsoleTaskRow[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    const param = (v: unknown): string => {
      params.push(v);
      return `$${params.length}`;
    };
    if (filter.status !== undefined) where.push(`status = ${param(filter.status)}`);
    if (filter.toolName !== undefined) where.push(`tool_name = ${param(filter.toolName)}`);
    if (filter.ownerId !== undefined) where.push(`owner_id = ${param(filter.ownerId)}`);
    if (filter.instanceId !== undefined) where.push(`instance_id = ${param(filter.instanceId)}::uuid`);
    if (filter.createdBefore) where.push(`created_at < ${param(filter.createdBefore)}`);
    if (filter.createdAfter) where.push(`created_at > ${param(filter.createdAfter)}`);
    if (after) where.push(`(created_at, id) < (${param(after.createdAt)}, ${param(after.id)})`);
    const rows = await this.dataSource.query<Row[]>(
      `SELECT ${CONSOLE_ROW_COLUMNS} FROM task
        ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY created_at DESC, id DESC LIMIT ${param(limit + 1)}`,
      params,
    );
    return rows.map(rowToConsoleTask);
  }

  /**
   * Tasks by status for the console: live statuses exactly (the live set is small and indexed by status),
   * finished ones counted up to `bound` (past that the console says "more than").
   */
  async consoleStatusCounts(bound: number): Promise<ConsoleStatusCount[]> {
    const [live, finished] = await Promise.all([
      this.countLiveByStatus(),
      this.dataSource.query<Row[]>(
        `SELECT s.status, (SELECT count(*) FROM (SELECT 1 FROM task t WHERE t.status = s.status LIMIT $1) x) AS n
           FROM (VALUES ('completed'), ('failed'), ('cancelled')) AS s(status)`,
        [bound + 1],
      ),
    ]);
    return [
      ...Object.entries(live).map(([status, count]) => ({
        status: status as TaskStatus,
        count,
        atLeast: false,
      })),
      ...finished.map((r) => ({ status: r.status as TaskStatus, ...bounded(r.n, bound) })),
    ];
  }

  /** The console's task page, with payload sizes and a checkpoint preview of at most `previewChars`. */
  async consoleTask(id: string, previewChars: number): Promise<ConsoleTaskDetail | null> {
    const [r] = await this.dataSource.query<Row[]>(
      `SELECT ${CONSOLE_ROW_COLUMNS}, session_id, expires_at, lease_expires_at, available_at, failed_attempts,
              max_attempts, resumable, idempotency_key, error, last_error, trace_context->>'traceparent' AS traceparent,
              redriven_from, octet_length(result::text) AS result_bytes,
              CASE WHEN result IS NULL THEN NULL ELSE coalesce((result->>'isError')::boolean, false) END
                AS result_is_error,
              octet_length(checkpoint::text) AS checkpoint_bytes,
              left(jsonb_pretty(checkpoint), $2) AS checkpoint_preview
         FROM task WHERE id = $1`,
      [id, previewChars],
    );
    if (!r) return null;
    return {
      ...rowToConsoleTask(r),
      sessionId: (r.session_id as string | null) ?? null,
      expiresAt: r.expires_at as Date,
      leaseExpiresAt: (r.lease_expires_at as Date | null) ?? null,
      availableAt: (r.available_at as Date | null) ?? null,
      failedAttempts: toNumber(r.failed_attempts),
      maxAttempts: toNumber(r.max_attempts),
      resumable: r.resumable === true,
      idempotencyKey: (r.idempotency_key as string | null) ?? null,
      error: (r.error as TaskErrorPayload | null) ?? null,
      lastError: (r.last_error as TaskErrorPayload | null) ?? null,
      traceparent: (r.traceparent as string | null) ?? null,
      redrivenFrom: (r.redriven_from as string | null) ?? null,
      resultBytes: nullableNumber(r.result_bytes),
      resultIsError: (r.result_is_error as boolean | null) ?? null,
      checkpointBytes: nullableNumber(r.checkpoint_bytes),
      checkpointPreview: (r.checkpoint_preview as string | null) ?? null,
    };
  }

  /** Up to `limit` tasks redriven from this one, oldest first (the console's "redriven as"). */
  async consoleRedrivenAs(id: string, limit: number): Promise<string[]> {
    const rows = await this.dataSource.query<Row[]>(
      `SELECT id FROM task WHERE redriven_from = $1 ORDER BY created_at, id LIMIT $2`,
      [id, limit],
    );
    return rows.map((r) => r.id as string);
  }

  /** Live tasks whose lease each of `instanceIds` holds (the console's instances page). */
  async consoleLeasesHeld(instanceIds: string[]): Promise<Map<string, number>> {
    if (instanceIds.length === 0) return new Map();
    const rows = await this.dataSource.query<Row[]>(
      `SELECT instance_id, count(*) AS n FROM task
        WHERE status IN ${LIVE_SQL} AND instance_id = ANY($1::uuid[])
        GROUP BY instance_id`,
      [instanceIds],
    );
    return new Map(rows.map((r) => [r.instance_id as string, toNumber(r.n)]));
  }

  /** What the janitor has still to do, each count bounded by `bound` (the console's janitor page). */
  async consoleJanitorBacklog(graceMs: number, bound: number): Promise<ConsoleJanitorBacklog> {
    const [r] = await this.dataSource.query<Row[]>(
      `SELECT
         (SELECT count(*) FROM (SELECT 1 FROM task WHERE status IN ${LIVE_SQL} AND expires_at <= now()
            LIMIT $2) x) AS expire,
         (SELECT count(*) FROM (SELECT 1 FROM task WHERE status IN ${TERMINAL_SQL}
            AND expires_at <= now() - $1::int * interval '1 millisecond' LIMIT $2) x) AS del,
         (SELECT count(*) FROM (SELECT 1 FROM task WHERE status = 'working' AND instance_id IS NULL
            LIMIT $2) x) AS queued,
         (SELECT count(*) FROM (SELECT 1 FROM task WHERE status IN ${LIVE_SQL} AND instance_id IS NOT NULL
            AND lease_expires_at < now() LIMIT $2) x) AS lapsed`,
      [graceMs, bound + 1],
    );
    return {
      dueToExpire: bounded(r.expire, bound),
      dueToDelete: bounded(r.del, bound),
      queued: bounded(r.queued, bound),
      leaseLapsed: bounded(r.lapsed, bound),
    };
  }
}
