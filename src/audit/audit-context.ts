import { trace, context as otelContext, isSpanContextValid } from '@opentelemetry/api';
import { contextSlot } from '../common/execution-context.js';
import { requestContext } from '../logging/request-context.js';
import type { AuditActor } from './audit.types.js';

/**
 * Who is acting, for every audit row written while `fn` runs: an operator (CLI, console), the janitor, a
 * worker running a claimed task. Outside any of these, a row written while serving a request is the
 * request principal's (actor 'owner'), and anything else is the system's. Kept in the execution context so
 * the repositories that write the rows need no extra parameter on every path that changes a task.
 */
const actorStore = contextSlot<AuditActor>('audit actor');

export function asActor<T>(actor: AuditActor, fn: () => T): T {
  return actorStore.run(actor, fn);
}

/**
 * A context captured earlier and put back (captureAuditContext, inAuditContext): work batched on behalf of
 * several callers (a commit group of creations or outcomes runs in whichever caller's context came first)
 * writes each caller's rows under that caller's context.
 */
const pinnedStore = contextSlot<AuditContext>('pinned audit context');

/** The audit context of the code running now, to hand to inAuditContext later. */
export function captureAuditContext(): AuditContext {
  return currentAuditContext();
}

/** Runs `fn` with `ctx` as the audit context of every row it writes (see pinnedStore). */
export function inAuditContext<T>(ctx: AuditContext, fn: () => T): T {
  return pinnedStore.run(ctx, fn);
}

/** The audit context of the code running now. */
export interface AuditContext {
  actor: AuditActor;
  requestId: string | null;
  traceId: string | null;
}

export function currentAuditContext(): AuditContext {
  const pinned = pinnedStore.get();
  if (pinned) return pinned;
  const request = requestContext.getStore();
  const explicit = actorStore.get();
  const actor: AuditActor =
    explicit ??
    (request?.principalId
      ? { kind: 'owner', principal: request.principalId }
      : { kind: 'system', principal: null });
  const span = trace.getSpan(otelContext.active())?.spanContext();
  return {
    actor,
    requestId: request?.requestId ?? null,
    traceId: span && isSpanContextValid(span) ? span.traceId : null,
  };
}
