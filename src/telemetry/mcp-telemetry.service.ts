import { Injectable } from '@nestjs/common';
import { context, SpanKind, trace, type Link } from '@opentelemetry/api';
import type { Request } from 'express';
import { Histogram } from 'prom-client';
import { MetricsService } from '../metrics/metrics.service.js';
import { ALL_VERSIONS, isModernVersion, META } from '../protocol/versions.js';
import { ToolRegistry } from '../tool-dispatch/tool-registry.service.js';
import { McpOperation, runInOperation, type OperationLabels } from './mcp-operation.js';
import { spanContextFromHeaders, spanContextFromMeta } from './trace-context.js';
import { tracer } from './tracer.js';
import { isJsonObject } from '../common/json.js';

/** Methods a label or span name may carry verbatim; anything else is `other` (label values stay bounded). */
const KNOWN_METHODS = new Set([
  'initialize',
  'ping',
  'tools/list',
  'tools/call',
  'prompts/list',
  'prompts/get',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'resources/subscribe',
  'resources/unsubscribe',
  'completion/complete',
  'logging/setLevel',
  'server/discover',
  'subscriptions/listen',
  'tasks/get',
  'tasks/result',
  'tasks/list',
  'tasks/cancel',
  'tasks/update',
  'notifications/initialized',
  'notifications/cancelled',
  'notifications/progress',
  'notifications/roots/list_changed',
]);
const VERSIONS = new Set(ALL_VERSIONS);
const RESOURCE_METHODS = new Set(['resources/read', 'resources/subscribe', 'resources/unsubscribe']);
const MAX_ATTRIBUTE = 256;

/**
 * The server side of the OpenTelemetry MCP conventions: one SERVER span per JSON-RPC message on /mcp, and
 * the `mcp.server.operation.duration` histogram (Prometheus: mcp_server_operation_duration_seconds).
 * Trace context: `params._meta.traceparent` is the parent when present, and the HTTP request's context (the
 * HTTP server span of the auto-instrumentation, or the traceparent header) is then linked; otherwise the
 * HTTP context is the parent. With tracing off the spans are the API's no-op ones and only the metric costs.
 */
@Injectable()
export class McpTelemetry {
  private readonly duration: Histogram<
    'mcp_method_name' | 'gen_ai_tool_name' | 'error_type' | 'mcp_protocol_version'
  >;
  private promptNames: Set<string> | undefined;

  constructor(
    metrics: MetricsService,
    private readonly registry: ToolRegistry,
  ) {
    this.duration = new Histogram({
      name: 'mcp_server_operation_duration_seconds',
      help: 'Duration of MCP requests handled on /mcp, by method, tool, error type and protocol version.',
      labelNames: ['mcp_method_name', 'gen_ai_tool_name', 'error_type', 'mcp_protocol_version'] as const,
      buckets: [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
      registers: [metrics.registry],
    });
  }

  /**
   * Starts the operation for the parsed body of a POST, or returns undefined when the body is not a request
   * or notification (a client's response, or garbage the controller will refuse).
   */
  begin(req: Request): McpOperation | undefined {
    const body: unknown = req.body;
    if (!isJsonObject(body) || typeof body.method !== 'string') return undefined;
    const rawMethod = body.method;
    const method = KNOWN_METHODS.has(rawMethod) ? rawMethod : 'other';
    const params = isJsonObject(body.params) ? body.params : {};
    const name = typeof params.name === 'string' ? params.name : undefined;
    const toolName = method === 'tools/call' && name && this.registry.hasTool(name) ? name : '';
    const promptName = method === 'prompts/get' && name && this.isPrompt(name) ? name : '';
    const target = toolName || promptName;

    const active = context.active();
    const ambient = trace.getSpanContext(active);
    const http = ambient && trace.isSpanContextValid(ambient) ? ambient : spanContextFromHeaders(req.headers);
    const fromMeta = spanContextFromMeta(params._meta);
    const links: Link[] = [];
    let parent = active;
    if (fromMeta) {
      parent = trace.setSpanContext(active, fromMeta);
      if (http) links.push({ context: http });
    } else if (http && http !== ambient) {
      parent = trace.setSpanContext(active, http);
    }
    const span = tracer().startSpan(
      target ? `${method} ${target}` : method,
      { kind: SpanKind.SERVER, links },
      parent,
    );
    if (span.isRecording()) {
      span.setAttribute('mcp.method.name', rawMethod.slice(0, MAX_ATTRIBUTE));
      const id = body.id;
      if (typeof id === 'string' || typeof id === 'number') {
        span.setAttribute('jsonrpc.request.id', String(id).slice(0, MAX_ATTRIBUTE));
      }
      span.setAttribute('network.transport', 'tcp');
      span.setAttribute('network.protocol.name', 'http');
      if (rawMethod === 'tools/call' && name) {
        span.setAttribute('gen_ai.tool.name', name.slice(0, MAX_ATTRIBUTE));
        span.setAttribute('gen_ai.operation.name', 'execute_tool');
      }
      if (rawMethod === 'prompts/get' && name)
        span.setAttribute('gen_ai.prompt.name', name.slice(0, MAX_ATTRIBUTE));
      if (RESOURCE_METHODS.has(rawMethod) && typeof params.uri === 'string') {
        span.setAttribute('mcp.resource.uri', params.uri.slice(0, 2048));
      }
    }
    const op = new McpOperation(span, trace.setSpan(parent, span), method, toolName, (labels, seconds) =>
      this.observe(labels, seconds),
    );
    const meta = isJsonObject(params._meta) ? params._meta : undefined;
    const version = meta?.[META.PROTOCOL_VERSION];
    if (typeof version === 'string' && isModernVersion(version)) op.setProtocolVersion(version);
    const sessionId = req.header('mcp-session-id');
    if (sessionId) op.setSessionId(sessionId.trim());
    return op;
  }

  /** Runs `fn` with the operation's span active (for child spans and log lines) and reachable. */
  run<T>(op: McpOperation, fn: () => Promise<T>): Promise<T> {
    return runInOperation(op, () => context.with(op.context, fn));
  }

  private observe(labels: OperationLabels, seconds: number): void {
    this.duration.observe(
      {
        mcp_method_name: labels.method,
        gen_ai_tool_name: labels.toolName,
        error_type: labels.errorType,
        mcp_protocol_version: VERSIONS.has(labels.protocolVersion) ? labels.protocolVersion : 'other',
      },
      seconds,
    );
  }

  private isPrompt(name: string): boolean {
    this.promptNames ??= new Set(this.registry.listPrompts().map((p) => p.name));
    return this.promptNames.has(name);
  }
}
