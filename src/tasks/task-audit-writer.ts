import { Injectable, Optional } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { currentAuditContext } from '../audit/audit-context.js';
import { AuditTrail } from '../audit/audit-trail.service.js';
import type { AuditActorKind, AuditEvent, AuditKind } from '../audit/audit.types.js';
import type { SqlTx } from '../database/sql-transaction.js';
import { auditedFields } from '../tool-dispatch/tool-audit.js';
import { NO_AUDIT, type AuditPolicy } from '../tool-dispatch/tool-dispatch.types.js';
import { ToolRegistry } from '../tool-dispatch/tool-registry.service.js';
import type { TaskStatus } from './task-state.js';
import type { TaskSnapshot } from './task.types.js';

/**
 * What a writer that knows why a task changed tells the audit trail (TaskChangePublisher.publish): the
 * kind, when the change alone does not say it (a claim, a retry, a hand-over, a rescue, an expiry), and
 * its detail.
 */
export interface TaskAuditNote {
  kind?: AuditKind;
  /** Overrides the context's actor (a claim is the worker's, whoever woke the claimer). */
  actor?: AuditActorKind;
  detail?: Record<string, unknown>;
  /** The result (completed) or error (failed) exactly as written, as JSON: hashed as is, not made again. */
  outcomeJson?: string;
  /** A run of the task starts on this instance with this change (a resume leased here): task.attempt too. */
  runStarts?: boolean;
}

/** A row the janitor deleted, as the audit trail records it (task.deleted). */
export interface DeletedTask {
  id: string;
  ownerId: string;
  sessionId: string | null;
  era: string;
  toolName: string;
  status: TaskStatus;
  attempt: number;
  createdAt: Date;
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The trace id of a stored W3C traceparent (`00-<trace id>-<span id>-<flags>`). */
function traceIdOf(task: TaskSnapshot): string | null {
  const id = task.traceContext?.traceparent.split('-')[1];
  return id && /^[0-9a-f]{32}$/.test(id) ? id : null;
}

/**
 * The kind of a change the writer did not name: a creation, a terminal status, or any other status change
 * (working <-> input_required). A write that keeps the status (progress, a claim, a same-status write) is
 * not a row of its own unless named.
 */
function derivedKind(task: TaskSnapshot, previous: TaskStatus | null): AuditKind | null {
  if (previous === null) return 'task.created';
  if (task.status === previous) return null;
  switch (task.status) {
    case 'completed':
      return 'task.completed';
    case 'failed':
      return 'task.failed';
    case 'cancelled':
      return 'task.cancelled';
    case 'working':
    case 'input_required':
      return 'task.status';
  }
}

/**
 * The task rows of the audit trail, written through AuditTrail inside the transaction that changes the
 * task (so on a task transaction they ride its COMMIT: no round trip of their own). Called by
 * TaskChangePublisher for every change, with a note where the writer knows more than the change shows.
 *
 * The principal of a row is the operator's for an operator's action (asActor), else the task owner's
 * (whoever acts: the owner, a worker, the janitor); detail.owner names the owner when they differ. The
 * arguments and results are stored as their size and sha256, plus the fields the tool opted in
 * (`@McpTool({ audit })`, redacted).
 */
@Injectable()
export class TaskAuditWriter {
  constructor(
    private readonly trail: AuditTrail,
    // Absent where no tools are registered (the admin CLI builds this class by hand): no field is opted in.
    @Optional() private readonly tools?: ToolRegistry,
  ) {}

  get enabled(): boolean {
    return this.trail.enabled;
  }

  /** Records the change of `task` from `previous` (null: created) inside `m` (see the class comment). */
  async changed(
    m: SqlTx,
    task: TaskSnapshot,
    previous: TaskStatus | null,
    note?: TaskAuditNote,
  ): Promise<void> {
    if (!this.trail.enabled) return;
    const kind = note?.kind ?? derivedKind(task, previous);
    if (kind) await this.trail.record(m, this.event(kind, task, previous, note));
    if (previous === null && task.redrivenFrom) {
      await this.trail.record(m, {
        ...this.event('task.redriven', task, null),
        taskId: task.redrivenFrom,
        status: null,
        attempt: null,
        detail: this.withOwner(task, { newTaskId: task.id }),
      });
    }
    // A creation leased to this instance, or a resume leased here, starts a run at once (a claim names it).
    if ((previous === null && task.instanceId !== null) || note?.runStarts) {
      await this.trail.record(m, {
        ...this.event('task.attempt', task, previous),
        actor: 'worker',
        detail: { start: previous === null ? 'created' : 'resumed' },
      });
    }
  }

  /** Records task.deleted for each row the janitor removed, inside the transaction that deleted them. */
  async deleted(m: SqlTx, rows: readonly DeletedTask[]): Promise<void> {
    if (!this.trail.enabled) return;
    for (const r of rows) {
      await this.trail.record(m, {
        kind: 'task.deleted',
        principal: this.principalFor(r.ownerId),
        taskId: r.id,
        sessionId: r.sessionId,
        tool: r.toolName,
        era: r.era,
        status: r.status,
        attempt: r.attempt,
        detail: { createdAt: r.createdAt.toISOString() },
      });
    }
  }

  private event(
    kind: AuditKind,
    task: TaskSnapshot,
    previous: TaskStatus | null,
    note?: TaskAuditNote,
  ): AuditEvent {
    const ctx = currentAuditContext();
    // An owner's read or write that finds the ttl run out expires the task, but the owner did not expire it.
    const actor =
      note?.actor ?? (kind === 'task.expired' && ctx.actor.kind === 'owner' ? 'system' : ctx.actor.kind);
    return {
      kind,
      actor,
      principal: this.principalFor(task.ownerId),
      taskId: task.id,
      sessionId: task.sessionId,
      tool: task.toolName,
      era: task.era,
      status: task.status,
      previousStatus: previous,
      attempt: task.attempt,
      traceId: ctx.traceId ?? traceIdOf(task),
      detail: this.detailOf(kind, task, note),
    };
  }

  /** The operator's id for an operator's action (asActor), else the owner's. */
  private principalFor(ownerId: string): string {
    return currentAuditContext().actor.principal ?? ownerId;
  }

  private withOwner(task: TaskSnapshot, detail: Record<string, unknown>): Record<string, unknown> {
    const principal = this.principalFor(task.ownerId);
    return principal === task.ownerId ? detail : { ...detail, owner: task.ownerId };
  }

  private detailOf(
    kind: AuditKind,
    task: TaskSnapshot,
    note?: TaskAuditNote,
  ): Record<string, unknown> | null {
    const detail: Record<string, unknown> = {};
    if (kind === 'task.created') {
      const args = task.requestParams.arguments;
      const json = JSON.stringify(args ?? {});
      detail.argumentBytes = Buffer.byteLength(json);
      detail.argumentSha256 = sha256(json);
      const opted = auditedFields(args, this.policyOf(task.toolName).arguments);
      if (opted) detail.arguments = opted;
      detail.queued = task.instanceId === null;
      if (task.redrivenFrom) detail.redrivenFrom = task.redrivenFrom;
    } else if (kind === 'task.completed') {
      const json = note?.outcomeJson ?? JSON.stringify(task.result);
      detail.resultBytes = Buffer.byteLength(json);
      detail.resultSha256 = sha256(json);
      const opted = auditedFields(task.result?.structuredContent, this.policyOf(task.toolName).result);
      if (opted) detail.result = opted;
    } else if (kind === 'task.failed') {
      // An error is a result too: its code, size and hash only (its message may quote the arguments).
      const json = note?.outcomeJson ?? JSON.stringify(task.error);
      detail.errorCode = task.error?.code ?? null;
      detail.errorBytes = Buffer.byteLength(json);
      detail.errorSha256 = sha256(json);
    }
    Object.assign(detail, note?.detail);
    const full = this.withOwner(task, detail);
    return Object.keys(full).length > 0 ? full : null;
  }

  private policyOf(toolName: string): AuditPolicy {
    return this.tools?.getTool(toolName)?.audit ?? NO_AUDIT;
  }
}
