import { Injectable, Optional } from '@nestjs/common';
import { hash } from 'node:crypto';
import { currentAuditContext, type AuditContext } from '../../audit/audit-context.js';
import { AuditTrail } from '../../audit/audit-trail.service.js';
import type { AuditActorKind, AuditEvent, AuditKind } from '../../audit/audit.types.js';
import type { SqlTx } from '../../database/sql-transaction.js';
import { canonicalJson } from '../../protocol/canonical-json.js';
import { auditedFields } from '../../tool-dispatch/tool-audit.js';
import { NO_AUDIT, type AuditPolicy } from '../../tool-dispatch/tool-dispatch.types.js';
import { ToolRegistry } from '../../tool-dispatch/tool-registry.service.js';
import type { TaskStatus } from '../task-state.js';
import type { TaskSnapshot } from '../task.types.js';

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

/**
 * A value's size and hash as the audit trail keeps them: of its canonical JSON (keys sorted at every level),
 * so the same arguments or result hash the same whatever order their keys came or were stored in, and
 * anyone holding the value can check it against the trail.
 */
function sizeAndHash(value: unknown): { bytes: number; sha256: string } {
  const json = canonicalJson(value);
  // crypto.hash: one call, no Hash object (Node >= 20.12, which package.json's engines already require).
  return { bytes: Buffer.byteLength(json), sha256: hash('sha256', json, 'hex') };
}

/** The trace id of a stored W3C traceparent (`00-<trace id>-<span id>-<flags>`). */
function traceIdOf(task: TaskSnapshot): string | null {
  const id = task.traceContext?.traceparent.split('-')[1];
  return id && /^[0-9a-f]{32}$/.test(id) ? id : null;
}

/** The operator's id for an operator's action (asActor), else the owner's. */
function principalFor(ownerId: string, ctx: AuditContext): string {
  return ctx.actor.principal ?? ownerId;
}

/** `detail` with the owner named when the row's principal is someone else (an operator). */
function withOwner(
  task: TaskSnapshot,
  ctx: AuditContext,
  detail: Record<string, unknown>,
): Record<string, unknown> {
  return principalFor(task.ownerId, ctx) === task.ownerId ? detail : { ...detail, owner: task.ownerId };
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

  /**
   * Records the change of `task` from `previous` (null: created) inside `m` (see the class comment). It is
   * synchronous (the rows join the INSERT sent with the COMMIT), so the task paths await nothing for it.
   */
  changed(m: SqlTx, task: TaskSnapshot, previous: TaskStatus | null, note?: TaskAuditNote): void {
    if (!this.trail.enabled) return;
    const ctx = currentAuditContext();
    const kind = note?.kind ?? derivedKind(task, previous);
    if (kind) this.trail.queue(m, this.event(kind, task, previous, ctx, note), ctx);
    if (previous === null && task.redrivenFrom) {
      this.trail.queue(
        m,
        {
          ...this.event('task.redriven', task, null, ctx),
          taskId: task.redrivenFrom,
          status: null,
          attempt: null,
          detail: withOwner(task, ctx, { newTaskId: task.id }),
        },
        ctx,
      );
    }
    // A resume leased here starts a run at once (a claim names its own). A creation leased to this instance
    // starts attempt 1 too, but its task.created row says so (attempt 1, detail.queued false): a row of its
    // own would be a third INSERT on every task's hot path for nothing a reader could not see already.
    if (note?.runStarts) {
      this.trail.queue(
        m,
        { ...this.event('task.attempt', task, previous, ctx), actor: 'worker', detail: { start: 'resumed' } },
        ctx,
      );
    }
  }

  /** Records task.deleted for each row the janitor removed, inside the transaction that deleted them. */
  deleted(m: SqlTx, rows: readonly DeletedTask[]): void {
    if (!this.trail.enabled) return;
    const ctx = currentAuditContext();
    for (const r of rows) {
      this.trail.queue(
        m,
        {
          kind: 'task.deleted',
          principal: principalFor(r.ownerId, ctx),
          taskId: r.id,
          sessionId: r.sessionId,
          tool: r.toolName,
          era: r.era,
          status: r.status,
          attempt: r.attempt,
          detail: { createdAt: r.createdAt.toISOString() },
        },
        ctx,
      );
    }
  }

  private event(
    kind: AuditKind,
    task: TaskSnapshot,
    previous: TaskStatus | null,
    ctx: AuditContext,
    note?: TaskAuditNote,
  ): AuditEvent {
    // An owner's read or write that finds the ttl run out expires the task, but the owner did not expire it.
    const actor =
      note?.actor ?? (kind === 'task.expired' && ctx.actor.kind === 'owner' ? 'system' : ctx.actor.kind);
    return {
      kind,
      actor,
      principal: principalFor(task.ownerId, ctx),
      taskId: task.id,
      sessionId: task.sessionId,
      tool: task.toolName,
      era: task.era,
      status: task.status,
      previousStatus: previous,
      attempt: task.attempt,
      // The task's own trace (its runs' spans join it), whatever span a batched write happens to run in.
      traceId: traceIdOf(task) ?? ctx.traceId,
      detail: this.detailOf(kind, task, ctx, note),
    };
  }

  private detailOf(
    kind: AuditKind,
    task: TaskSnapshot,
    ctx: AuditContext,
    note?: TaskAuditNote,
  ): Record<string, unknown> | null {
    const detail: Record<string, unknown> = {};
    if (kind === 'task.created') {
      const args = task.requestParams.arguments;
      const { bytes, sha256 } = sizeAndHash(args ?? {});
      detail.argumentBytes = bytes;
      detail.argumentSha256 = sha256;
      const opted = auditedFields(args, this.policyOf(task.toolName).arguments);
      if (opted) detail.arguments = opted;
      detail.queued = task.instanceId === null;
      if (task.redrivenFrom) detail.redrivenFrom = task.redrivenFrom;
    } else if (kind === 'task.completed') {
      const { bytes, sha256 } = sizeAndHash(task.result);
      detail.resultBytes = bytes;
      detail.resultSha256 = sha256;
      const opted = auditedFields(task.result?.structuredContent, this.policyOf(task.toolName).result);
      if (opted) detail.result = opted;
    } else if (kind === 'task.failed') {
      // An error is a result too: its code, size and hash only (its message may quote the arguments).
      const { bytes, sha256 } = sizeAndHash(task.error);
      detail.errorCode = task.error?.code ?? null;
      detail.errorBytes = bytes;
      detail.errorSha256 = sha256;
    }
    Object.assign(detail, note?.detail);
    const full = withOwner(task, ctx, detail);
    return Object.keys(full).length > 0 ? full : null;
  }

  private policyOf(toolName: string): AuditPolicy {
    return this.tools?.auditPolicyOf(toolName) ?? NO_AUDIT;
  }
}
