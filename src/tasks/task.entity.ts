import { Check, Column, Entity, Index, PrimaryColumn } from 'typeorm';
import type { StoredTraceContext } from '../telemetry/trace-context.js';
import type { TaskStatus } from './task-state.js';
import type { InputRequest, TaskEra, TaskErrorPayload } from './task.types.js';

/**
 * One durable task. Only the task repositories (tasks/*.repository.ts, janitor/janitor.repository.ts) read or
 * write this table; everything else sees TaskSnapshot.
 * Indexes, by the query that needs them:
 * - task_owner_created_idx: tasks/list keyset pagination (owner, created_at DESC, id DESC);
 * - task_owner_status_idx: the live-task count per owner under the creation lock;
 * - task_status_lease_idx: the janitor's lapsed-lease sweep and the live count by status;
 * - task_expires_idx: the janitor's expiry and deletion sweeps;
 * - task_queue_fair_idx: the claim of queued work (working, no instance), by fairness key then available_at;
 * - task_running_fair_idx: how many tasks each fairness key has running (the claim's fair share);
 * - task_limited_running_idx, task_limited_queued_idx: the runs and queued tasks of tools that declare limits;
 * - task_owner_idempotency_idx: one task per (owner, Idempotency-Key) while it exists;
 * - task_created_idx, task_tool_created_idx, task_failed_created_idx, task_instance_created_idx,
 *   task_redriven_from_idx: the /admin console's reads across owners (migration 1765300000002 says which).
 */
@Entity({ name: 'task' })
@Index('task_owner_created_idx', ['ownerId', 'createdAt', 'id'])
@Index('task_owner_status_idx', ['ownerId', 'status'])
@Index('task_status_lease_idx', ['status', 'leaseExpiresAt'])
@Index('task_expires_idx', ['expiresAt'])
@Index('task_queue_fair_idx', ['fairnessKey', 'availableAt'], {
  where: `status = 'working' AND instance_id IS NULL`,
})
@Index('task_running_fair_idx', ['fairnessKey'], { where: `status = 'working' AND instance_id IS NOT NULL` })
@Index('task_limited_running_idx', ['toolName', 'limitKey'], {
  where: `status = 'working' AND instance_id IS NOT NULL AND limit_key IS NOT NULL`,
})
@Index('task_limited_queued_idx', ['toolName', 'limitKey'], {
  where: `status = 'working' AND instance_id IS NULL AND limit_key IS NOT NULL`,
})
@Index('task_owner_idempotency_idx', ['ownerId', 'idempotencyKey'], {
  unique: true,
  where: 'idempotency_key IS NOT NULL',
})
@Index('task_created_idx', ['createdAt', 'id'])
@Index('task_tool_created_idx', ['toolName', 'createdAt', 'id'])
@Index('task_failed_created_idx', ['status', 'createdAt', 'id'], {
  where: `status IN ('failed', 'cancelled')`,
})
@Index('task_instance_created_idx', ['instanceId', 'createdAt', 'id'], { where: 'instance_id IS NOT NULL' })
@Index('task_redriven_from_idx', ['redrivenFrom'], { where: 'redriven_from IS NOT NULL' })
@Check('task_status_check', `"status" IN ('working', 'input_required', 'completed', 'failed', 'cancelled')`)
@Check('task_era_check', `"era" IN ('legacy', 'modern')`)
@Check('task_queue_hold_check', `"queue_hold" IN ('paused', 'limit')`)
export class Task {
  @PrimaryColumn({ type: 'text' })
  id: string;

  @Column({ type: 'text' })
  ownerId: string;

  @Column({ type: 'text', nullable: true })
  sessionId: string | null;

  @Column({ type: 'text' })
  era: TaskEra;

  @Column({ type: 'text' })
  toolName: string;

  @Column({ type: 'text' })
  status: TaskStatus;

  @Column({ type: 'text', nullable: true })
  statusMessage: string | null;

  @Column({ type: 'timestamptz' })
  createdAt: Date;

  @Column({ type: 'timestamptz' })
  lastUpdatedAt: Date;

  @Column({ type: 'integer' })
  ttlMs: number;

  @Column({ type: 'timestamptz' })
  expiresAt: Date;

  @Column({ type: 'integer' })
  pollIntervalMs: number;

  @Column({ type: 'jsonb' })
  requestParams: Record<string, unknown>;

  @Column({ type: 'jsonb', nullable: true })
  result: Record<string, unknown> | null;

  @Column({ type: 'jsonb', nullable: true })
  error: TaskErrorPayload | null;

  @Column({ type: 'jsonb', default: () => "'{}'" })
  inputRequests: Record<string, InputRequest>;

  @Column({ type: 'jsonb', default: () => "'{}'" })
  inputResponses: Record<string, unknown>;

  @Column({ type: 'jsonb', nullable: true })
  handlerState: unknown;

  @Column({ type: 'integer', default: 0 })
  inputRounds: number;

  /** bigint comes back from pg as a string; the repository converts it. */
  @Column({ type: 'bigint', default: 1 })
  generation: string;

  @Column({ type: 'uuid', nullable: true })
  instanceId: string | null;

  @Column({ type: 'timestamptz', nullable: true })
  leaseExpiresAt: Date | null;

  /**
   * Bumped by the task_change_version trigger (migration 1765031500000) whenever what clients see changes;
   * grows in commit order per row, so listeners catch up from it after missing notifications.
   */
  @Column({ type: 'bigint', default: 0 })
  changeVersion: string;

  /** W3C context of the span that created the task (telemetry/trace-context.ts); null when untraced. */
  @Column({ type: 'jsonb', nullable: true })
  traceContext: StoredTraceContext | null;

  /** The run the task is on: 1 for the first, +1 for each retry, hand-over or rescue (migration 1765200000000). */
  @Column({ type: 'integer', default: 1 })
  attempt: number;

  /** Runs that failed (errors, lost workers): what the retry budget counts. Hand-overs do not. */
  @Column({ type: 'integer', default: 0 })
  failedAttempts: number;

  /** From the tool's retry policy at creation (1: no retries). */
  @Column({ type: 'integer', default: 1 })
  maxAttempts: number;

  /** From the tool's declaration at creation: a lost or drained run is re-queued instead of failed. */
  @Column({ type: 'boolean', default: false })
  resumable: boolean;

  /** The last progress state the handler saved (fenced by the run's generation). */
  @Column({ type: 'jsonb', nullable: true })
  checkpoint: unknown;

  /** The error of the last failed run. */
  @Column({ type: 'jsonb', nullable: true })
  lastError: TaskErrorPayload | null;

  /** Set while queued (working, no instance): the earliest time a worker may claim it. */
  @Column({ type: 'timestamptz', nullable: true })
  availableAt: Date | null;

  /** The owner's principal as the creating request saw it, for runs claimed elsewhere. */
  @Column({ type: 'jsonb', nullable: true })
  principal: Record<string, unknown> | null;

  @Column({ type: 'text', nullable: true })
  idempotencyKey: string | null;

  /** Hash of the tool and arguments the idempotency key was used with. */
  @Column({ type: 'text', nullable: true })
  requestHash: string | null;

  /** Whose share of the workers the task runs on (TASK_FAIR_SHARE): a principal, a tenant, or '' (off). */
  @Column({ type: 'text', default: '' })
  fairnessKey: string;

  /** Tasks of tools that declare limits: the per-key value of the arguments, '' without a per-key limit. */
  @Column({ type: 'text', nullable: true })
  limitKey: string | null;

  /** Why a queued task is not claimable now: its tool is paused, or a limit holds it (QueueHold). */
  @Column({ type: 'text', nullable: true })
  queueHold: 'paused' | 'limit' | null;

  /** The task `tasks retry` created this one from. */
  @Column({ type: 'text', nullable: true })
  redrivenFrom: string | null;
}
