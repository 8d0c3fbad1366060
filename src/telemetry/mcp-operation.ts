import { SpanStatusCode, type Context, type Span } from '@opentelemetry/api';
import { contextSlot } from '../common/execution-context.js';
import { createHash } from 'node:crypto';
import { KNOWN_ERROR_CODES } from '../protocol/json-rpc.js';

/** What the duration metric needs to know when an operation ends. */
export interface OperationLabels {
  method: string;
  toolName: string;
  protocolVersion: string;
  errorType: string;
}

/**
 * One JSON-RPC request (or notification) being served on /mcp: its server span and the labels of its
 * `mcp.server.operation.duration` observation. Code deep in the request path reaches it through
 * `currentOperation()` to record the protocol version, the session or the outcome, without threading it
 * through every signature.
 */
export class McpOperation {
  private readonly started = process.hrtime.bigint();
  private errorType = '';
  private protocolVersion: string | undefined;
  private ended = false;

  constructor(
    readonly span: Span,
    readonly context: Context,
    readonly method: string,
    private readonly toolName: string,
    private readonly finish: (labels: OperationLabels, seconds: number) => void,
  ) {}

  setProtocolVersion(version: string): void {
    this.protocolVersion = version;
    if (this.span.isRecording()) this.span.setAttribute('mcp.protocol.version', version);
  }

  /** Session ids are bearer secrets: spans only ever carry a digest of them. */
  setSessionId(sessionId: string): void {
    if (this.span.isRecording()) this.span.setAttribute('mcp.session.id', hashSessionId(sessionId));
  }

  /** The request ended in a JSON-RPC error. The first outcome recorded wins. */
  failed(code: number, message: string): void {
    if (this.errorType) return;
    // The code may be a client's (its answer to an elicitation) or a tool's: only known codes become label
    // values, so the series count cannot grow with what callers send. The span keeps the actual code.
    this.errorType = KNOWN_ERROR_CODES.has(code) ? String(code) : 'other';
    if (this.span.isRecording()) {
      this.span.setAttribute('error.type', this.errorType);
      this.span.setAttribute('rpc.response.status_code', String(code));
      this.span.setStatus({ code: SpanStatusCode.ERROR, message });
    }
  }

  /** tools/call answered with `isError: true`: a tool error, not a protocol one. */
  toolError(): void {
    if (this.errorType || this.method !== 'tools/call') return;
    this.errorType = 'tool_error';
    if (this.span.isRecording()) {
      this.span.setAttribute('error.type', 'tool_error');
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: 'tool returned isError' });
    }
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.span.end();
    this.finish(
      {
        method: this.method,
        toolName: this.toolName,
        protocolVersion: this.protocolVersion ?? '',
        errorType: this.errorType,
      },
      Number(process.hrtime.bigint() - this.started) / 1e9,
    );
  }
}

export function hashSessionId(sessionId: string): string {
  return createHash('sha256').update(sessionId).digest('hex');
}

const store = contextSlot<McpOperation>('mcp operation');

export function runInOperation<T>(op: McpOperation, fn: () => T): T {
  return store.run(op, fn);
}

/** The operation of the request being served, if any (undefined in background work). */
export function currentOperation(): McpOperation | undefined {
  return store.get();
}
