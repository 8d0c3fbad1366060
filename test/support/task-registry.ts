import { newTaskId } from '../../src/tasks/task-ids.js';
import type { NewTask } from '../../src/tasks/store/task-creation.repository.js';
import type { CommitGroupListener } from '../../src/database/commit-group.js';

import { withClient } from './test-database.js';
import { type CreateTaskInput } from '../../src/tasks/execution/task-creation.service.js';

/** A new task row for the registry's insert, leased to `instanceId` (the registry tests' one factory). */
export function newTaskRow(
  instanceId: string,
  ownerId: string,
  ttlMs = 60000,
  requestParams: Record<string, unknown> = {},
): NewTask {
  return {
    id: newTaskId(),
    ownerId,
    sessionId: null,
    era: 'modern',
    toolName: 't',
    ttlMs,
    pollIntervalMs: 1000,
    requestParams,
    instanceId,
    leaseMs: 30000,
  };
}

/**
 * The creation-limit usage counters (task_usage, task_usage_total) next to a recount of the rows they stand
 * for, per owner and in total: tests expect the two halves to be equal after whatever they ran.
 */
export async function usageAgainstRows(url: string): Promise<{ counters: unknown; rows: unknown }> {
  return withClient(url, async (c) => {
    const counters = await c.query(
      `SELECT owner_id, sum(live)::int AS live, sum(retained)::int AS retained FROM task_usage
        GROUP BY owner_id HAVING sum(live) <> 0 OR sum(retained) <> 0 ORDER BY owner_id`,
    );
    const rows = await c.query(
      `SELECT owner_id, count(*) FILTER (WHERE status IN ('working', 'input_required'))::int AS live,
              count(*) FILTER (WHERE status NOT IN ('working', 'input_required'))::int AS retained
         FROM task GROUP BY owner_id ORDER BY owner_id`,
    );
    const [total] = (await c.query('SELECT coalesce(sum(live), 0)::int AS n FROM task_usage_total')).rows;
    const [live] = (
      await c.query(`SELECT count(*)::int AS n FROM task WHERE status IN ('working', 'input_required')`)
    ).rows;
    return {
      counters: { owners: counters.rows, total: total.n },
      rows: { owners: rows.rows, total: live.n },
    };
  });
}

/** A creation request as the registry's int suites make it: a legacy `slow_tool` call of session `sess-1`. */
export function legacyTaskInput(ownerId: string, extra: Partial<CreateTaskInput> = {}): CreateTaskInput {
  return {
    ownerId,
    era: 'legacy',
    sessionId: 'sess-1',
    toolName: 'slow_tool',
    requestParams: { name: 'slow_tool', arguments: { n: 1 } },
    ...extra,
  };
}

export interface CommitGroupRecord {
  kind: string;
  size: number;
  fellBack: boolean;
}

/** Records every commit group the given repositories run (creations, outcomes) into `groups`. */
export function recordCommitGroups(
  groups: CommitGroupRecord[],
  commitGroups: { onGroup(listener: CommitGroupListener): void },
): void {
  const onGroup: CommitGroupListener = (kind, size, fellBack) => groups.push({ kind, size, fellBack });
  commitGroups.onGroup(onGroup);
}
