import type { ConsoleTaskRow } from './tasks-admin.repository.js';
import type { StoredTraceContext } from '../../telemetry/trace-context.js';
import type { TaskStatus } from '../task-state.js';
import type { InputRequest, TaskEra, TaskErrorPayload, TaskSnapshot } from '../task.types.js';

/*
 * The SQL text and row mapping of task rows, shared by the task store's repositories and the janitor's: the
 * one place that maps the task table's columns. Nothing outside those repositories uses it.
 */

/** Timestamps are kept at millisecond precision so list cursors (JS Dates) compare exactly. */
export const NOW_MS = `date_trunc('milliseconds', now())`;
export const LIVE_SQL = `('working', 'input_required')`;
/** expires_at − now() in milliseconds, for a written row (see ExpiryReading). */
export const MS_UNTIL_EXPIRY = `(extract(epoch FROM (t.expires_at - now())) * 1000)::float8 AS ms_until_expiry`;

/**
 * Where a written task stands against its ttl, by the database clock: `msUntilExpiry` is expires_at − now()
 * of the writing transaction, `measuredAt` a performance.now() taken before that transaction began, so
 * measuredAt + msUntilExpiry is no later than the expiry (FinishedTaskCache.put).
 */
export interface ExpiryReading {
  measuredAt: number;
  msUntilExpiry: number;
}

/** The ExpiryReading of a row written with MS_UNTIL_EXPIRY, against performance.now() taken before the write. */
export function expiryOf(row: Row, measuredAt: number): ExpiryReading {
  return { measuredAt, msUntilExpiry: toNumber(row.ms_until_expiry) };
}
export const TERMINAL_SQL = `('completed', 'failed', 'cancelled')`;

/**
 * The columns a snapshot is made of (see rowToSnapshot). Named, not `*`: a prepared statement's result shape
 * is fixed when it is planned, so a column added by a later migration must not change it under a live pool.
 */
export const SNAPSHOT_COLUMNS = `id, owner_id, session_id, era, tool_name, status, status_message, created_at,
       last_updated_at, ttl_ms, expires_at, poll_interval_ms, request_params, result, error, input_requests,
       input_responses, handler_state, input_rounds, generation, instance_id, lease_expires_at, trace_context,
       attempt, failed_attempts, max_attempts, resumable, available_at, redriven_from`;

export type Row = Record<string, unknown>;

/** TypeORM answers UPDATE/DELETE … RETURNING on postgres with [rows, rowCount], other statements with rows. */
export function returned(result: unknown): Row[] {
  const r = result as unknown[];
  return (Array.isArray(r[0]) ? r[0] : r) as Row[];
}

export function toNumber(v: unknown): number {
  return typeof v === 'number' ? v : Number(v);
}

/** Maps a raw `task` row (snake_case, as RETURNING * gives it) to the immutable snapshot. */
export function rowToSnapshot(r: Row): TaskSnapshot {
  return Object.freeze({
    id: r.id as string,
    ownerId: r.owner_id as string,
    sessionId: (r.session_id as string | null) ?? null,
    era: r.era as TaskEra,
    toolName: r.tool_name as string,
    status: r.status as TaskStatus,
    statusMessage: (r.status_message as string | null) ?? null,
    createdAt: r.created_at as Date,
    lastUpdatedAt: r.last_updated_at as Date,
    ttlMs: toNumber(r.ttl_ms),
    expiresAt: r.expires_at as Date,
    pollIntervalMs: toNumber(r.poll_interval_ms),
    requestParams: (r.request_params as Record<string, unknown>) ?? {},
    result: (r.result as Record<string, unknown> | null) ?? null,
    error: (r.error as TaskErrorPayload | null) ?? null,
    inputRequests: (r.input_requests as Record<string, InputRequest>) ?? {},
    inputResponses: (r.input_responses as Record<string, unknown>) ?? {},
    handlerState: r.handler_state ?? null,
    inputRounds: toNumber(r.input_rounds),
    generation: toNumber(r.generation),
    instanceId: (r.instance_id as string | null) ?? null,
    leaseExpiresAt: (r.lease_expires_at as Date | null) ?? null,
    traceContext: (r.trace_context as StoredTraceContext | null) ?? null,
    attempt: toNumber(r.attempt ?? 1),
    failedAttempts: toNumber(r.failed_attempts ?? 0),
    maxAttempts: toNumber(r.max_attempts ?? 1),
    resumable: r.resumable === true,
    availableAt: (r.available_at as Date | null) ?? null,
    redrivenFrom: (r.redriven_from as string | null) ?? null,
  });
}

/**
 * Change hooks lock per-session rows (the SSE stream counter): every transaction that publishes changes of
 * several sessions does so in this one order, so none can wait for another in a circle over them.
 */
export function bySessionRow(a: Row, b: Row): number {
  return ((a.session_id as string | null) ?? '').localeCompare((b.session_id as string | null) ?? '');
}
export function bySession(a: TaskSnapshot, b: TaskSnapshot): number {
  return (a.sessionId ?? '').localeCompare(b.sessionId ?? '');
}

/** A line of the console's task list, from its projection (CONSOLE_ROW_COLUMNS of TasksAdminRepository). */
export function rowToConsoleTask(r: Row): ConsoleTaskRow {
  return {
    id: r.id as string,
    ownerId: r.owner_id as string,
    ownerName: (r.owner_name as string | null) ?? null,
    toolName: r.tool_name as string,
    era: r.era as TaskEra,
    status: r.status as TaskStatus,
    statusMessage: (r.status_message as string | null) ?? null,
    createdAt: r.created_at as Date,
    lastUpdatedAt: r.last_updated_at as Date,
    instanceId: (r.instance_id as string | null) ?? null,
    attempt: toNumber(r.attempt),
  };
}
