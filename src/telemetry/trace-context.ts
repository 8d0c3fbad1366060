import {
  context,
  ROOT_CONTEXT,
  trace,
  type Context,
  type Link,
  type SpanContext,
  type TextMapGetter,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

/**
 * W3C trace context in the places MCP carries it: `params._meta` (the conventions' first choice), HTTP
 * headers (the fallback) and the task row (so a task's later work joins the trace that created it). The
 * propagator is used directly rather than through the global one, so these carriers mean the same thing
 * whatever propagators the SDK was configured with.
 */
const w3c = new W3CTraceContextPropagator();

/** What a task row keeps of the span that created it (`task.trace_context`). */
export interface StoredTraceContext {
  traceparent: string;
  tracestate?: string;
}

const recordGetter: TextMapGetter<Record<string, unknown>> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => {
    const v = carrier[key];
    if (typeof v === 'string') return v;
    if (Array.isArray(v) && typeof v[0] === 'string') return v[0];
    return undefined;
  },
};

function extract(carrier: Record<string, unknown>): SpanContext | undefined {
  if (typeof recordGetter.get(carrier, 'traceparent') !== 'string') return undefined;
  const sc = trace.getSpanContext(w3c.extract(ROOT_CONTEXT, carrier, recordGetter));
  return sc && trace.isSpanContextValid(sc) ? sc : undefined;
}

/** The remote parent named by `params._meta.traceparent` / `tracestate`, if well-formed. */
export function spanContextFromMeta(meta: unknown): SpanContext | undefined {
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) return undefined;
  return extract(meta as Record<string, unknown>);
}

/** The remote parent named by the `traceparent` / `tracestate` HTTP headers, if well-formed. */
export function spanContextFromHeaders(headers: Record<string, unknown>): SpanContext | undefined {
  return extract(headers);
}

/** The active span's context as a task row stores it, or null when nothing is being traced. */
export function captureTraceContext(ctx: Context = context.active()): StoredTraceContext | null {
  const sc = trace.getSpanContext(ctx);
  if (!sc || !trace.isSpanContextValid(sc)) return null;
  const carrier: Record<string, string> = {};
  w3c.inject(ctx, carrier, {
    set: (c: Record<string, string>, k: string, v: string) => {
      c[k] = v;
    },
  });
  if (!carrier.traceparent) return null;
  return carrier.tracestate
    ? { traceparent: carrier.traceparent, tracestate: carrier.tracestate }
    : { traceparent: carrier.traceparent };
}

/** The stored context of a task, back as a span context (a parent or a link target). */
export function storedSpanContext(stored: unknown): SpanContext | undefined {
  if (typeof stored !== 'object' || stored === null) return undefined;
  return extract(stored as Record<string, unknown>);
}

/** A context whose parent is the stored span, for work that continues a task's trace. */
export function contextFromStored(stored: unknown): Context {
  const sc = storedSpanContext(stored);
  return sc ? trace.setSpanContext(ROOT_CONTEXT, sc) : ROOT_CONTEXT;
}

/** A span link to the task's creating span, when it was traced. */
export function linkToStored(stored: unknown, attributes?: Link['attributes']): Link[] {
  const sc = storedSpanContext(stored);
  return sc ? [{ context: sc, attributes }] : [];
}
