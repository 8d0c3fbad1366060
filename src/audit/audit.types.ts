/**
 * What the audit trail records. Kinds are dotted `subject.event` names; a reader filters on them and a SIEM
 * maps them. Adding a kind is backwards compatible; renaming one is not (exports and alert rules use them).
 */
export const AUDIT_KINDS = [
  // Tasks (written in the transaction that changes the task row; src/tasks/store/task-audit-writer.ts). Every task
  // row has task_id, tool, era, status (after the change), previous_status and attempt; principal is the
  // operator's for an operator's action (detail.owner then names the owner), else the task owner's.
  'task.created', // detail: argumentBytes, argumentSha256 (canonical JSON), queued, idempotencyKey?, redrivenFrom?, arguments? (opted in)
  'task.status', // any other status change (working <-> input_required): a park (worker), a resume (owner)
  'task.completed', // detail: resultBytes, resultSha256, result? (opted-in fields of structuredContent)
  'task.failed', // detail: errorCode, errorBytes, errorSha256 (never the message)
  'task.cancelled', // actor says by whom: owner, operator or janitor
  'task.expired', // ttl ran out: janitor, lease renewal (worker), an owner's read/write found it (system)
  // A run started (actor worker): detail.start 'claimed' (waitedMs) | 'resumed'. A creation run at once on
  // the instance that took it has none: its task.created row (attempt 1, detail.queued false) says so.
  'task.attempt',
  'task.retry_scheduled', // a failed run re-queued with backoff (detail: delayMs, availableAt, failedAttempts, maxAttempts, errorCode)
  // A drain released a resumable run to the queue (detail.handedOverAttempt), or a task leased here by a claim
  // or creation whose COMMIT answer was lost went back to the queue before any run (detail.notStarted, attempt).
  'task.handed_over',
  'task.rescued', // a lapsed lease or dead instance (janitor): detail.outcome 'requeued' | 'failed', lostAttempt
  'task.redriven', // on the OLD task: `tasks retry` (or the console) created detail.newTaskId from it
  'task.deleted', // the janitor removed the row after its retention (status: its last; detail.createdAt)
  // Sessions.
  'session.opened',
  'session.ended', // detail.reason: 'client' (DELETE), 'idle' (the sweep), 'operator' (CLI, console)
  // API keys.
  'api_key.created',
  'api_key.revoked',
  // Access.
  'auth.scope_refused', // a principal lacked a required scope (detail.missing, detail.route)
  'admin.refused', // a principal without the admin scope reached /admin
  // A tool's queue (`queue pause|resume`, the console): detail.tasks, the queued tasks held or let go.
  'queue.paused',
  'queue.resumed',
  // Operator actions that are not one of the above (e.g. `principals purge`).
  'operator.action',
] as const;
export type AuditKind = (typeof AUDIT_KINDS)[number];

/** Who caused an event. */
export const AUDIT_ACTORS = ['owner', 'operator', 'janitor', 'worker', 'system'] as const;
export type AuditActorKind = (typeof AUDIT_ACTORS)[number];

/** The actor an event is recorded under; `principal` is the operator's id for operator actions. */
export interface AuditActor {
  kind: AuditActorKind;
  principal?: string | null;
  /** Where the operator acted: 'cli' or 'console' (kept in detail.via). */
  via?: 'cli' | 'console';
}

/** One event as a writer hands it to AuditTrail. Unset fields are filled from the audit context. */
export interface AuditEvent {
  kind: AuditKind;
  /** Defaults to the context's actor (see audit-context.ts), else 'system'. */
  actor?: AuditActorKind;
  /** Defaults to the context's actor principal, else the request's principal. */
  principal?: string | null;
  taskId?: string | null;
  sessionId?: string | null;
  tool?: string | null;
  era?: string | null;
  status?: string | null;
  previousStatus?: string | null;
  attempt?: number | null;
  /** Defaults to the request's trace id (the active span), if any. */
  traceId?: string | null;
  detail?: Record<string, unknown> | null;
}

/** An audit row as readers (CLI, console, export) see it. */
export interface AuditRecord {
  id: string;
  at: Date;
  kind: string;
  actor: AuditActorKind;
  principal: string | null;
  taskId: string | null;
  sessionId: string | null;
  tool: string | null;
  era: string | null;
  status: string | null;
  previousStatus: string | null;
  attempt: number | null;
  instanceId: string | null;
  traceId: string | null;
  requestId: string | null;
  detail: Record<string, unknown> | null;
}
