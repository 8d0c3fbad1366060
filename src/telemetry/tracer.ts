import { trace, type Tracer } from '@opentelemetry/api';

export const TRACER_NAME = 'mcp-task-server';

/**
 * The tracer every manual span comes from. Resolved on each call (cheap: the API caches the provider), so
 * a provider registered after this module loaded (the SDK at startup, the in-memory one in tests) is used.
 * With no SDK registered it is the API's no-op tracer: spans are non-recording and cost next to nothing.
 */
export function tracer(): Tracer {
  return trace.getTracer(TRACER_NAME);
}
