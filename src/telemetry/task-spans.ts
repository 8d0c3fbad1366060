import { context, SpanKind, SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api';
import { contextFromStored, linkToStored } from './trace-context.js';
import { tracer } from './tracer.js';
import { errorMessage } from '../common/error-message.js';

/** What a task span needs of a task: the snapshot and the janitor's swept rows both have it. */
export interface TracedTask {
  id: string;
  toolName: string;
  traceContext: unknown;
}

function taskAttributes(task: TracedTask, extra?: Attributes): Attributes {
  return {
    'mcp.task.id': task.id,
    'gen_ai.tool.name': task.toolName,
    ...extra,
  };
}

/**
 * A span continuing a task's trace: its parent is the span that created the task (stored with the task, so
 * this works on any instance, long after the creating request ended), and the span active here (a request
 * that resumed the task, a janitor sweep) is linked, so both sides can be found from either.
 */
export function startTaskSpan(name: string, task: TracedTask, attributes?: Attributes): Span {
  const active = trace.getSpanContext(context.active());
  const links = active && trace.isSpanContextValid(active) ? [{ context: active }] : [];
  return tracer().startSpan(
    name,
    { kind: SpanKind.INTERNAL, attributes: taskAttributes(task, attributes), links },
    contextFromStored(task.traceContext),
  );
}

/** Runs `fn` inside a task span (ended when `fn` settles; an exception marks it failed). */
export async function inTaskSpan<T>(
  name: string,
  task: TracedTask,
  fn: () => Promise<T>,
  attributes?: Attributes,
): Promise<T> {
  const span = startTaskSpan(name, task, attributes);
  try {
    return await context.with(trace.setSpan(context.active(), span), fn);
  } catch (err) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: errorMessage(err) });
    throw err;
  } finally {
    span.end();
  }
}

/** A request that changes a task (cancel, input) links its own span to the task's creating span. */
export function linkActiveSpanToTask(task: { traceContext: unknown }): void {
  const span = trace.getActiveSpan();
  if (!span?.isRecording()) return;
  for (const link of linkToStored(task.traceContext, { 'mcp.task.link': 'created_by' })) span.addLink(link);
}
