import {
  correlationId,
  internalErrorText,
  isDatabaseUnavailable,
  noteRetryableFault,
} from '../common/internal-fault.js';
import { Logger } from '@nestjs/common';
import { SessionError } from '../sessions/sessions.errors.js';
import { McpProtocolError } from '../tool-dispatch/tool-context.js';
import { TaskError, TaskErrorCode } from '../tasks/tasks.errors.js';
import { ToolDispatchError, ToolDispatchErrorCode } from '../tool-dispatch/tool-dispatch.errors.js';
import { JSONRPC, type JsonRpcErrorObject } from './json-rpc.js';
import { ProtocolError } from './protocol.errors.js';
import type { Era } from './request-context.js';
import { RequestStateError } from './request-state.js';

const logger = new Logger('McpErrors');
const RESOURCE_NOT_FOUND_LEGACY = JSONRPC.RESOURCE_NOT_FOUND_LEGACY;

export interface MappedError {
  error: JsonRpcErrorObject;
  httpStatus: number;
}

type Mapper = (err: Error, era: Era) => MappedError | undefined;
const extraMappers: Mapper[] = [];

/** Feature modules register how their domain errors look on the wire; the mapping still happens here, once. */
export function registerErrorMapper(mapper: Mapper): void {
  extraMappers.push(mapper);
}

/** Longest error message an answer (and the refusal's log line) carries, whatever text went into it. */
const MAX_MESSAGE_CHARS = 2048;

function rpc(code: number, text: string, data?: unknown): JsonRpcErrorObject {
  const message = text.length > MAX_MESSAGE_CHARS ? `${text.slice(0, MAX_MESSAGE_CHARS - 1)}…` : text;
  return data === undefined ? { code, message } : { code, message, data };
}

/** The one place that turns any error into a JSON-RPC error and an HTTP status. */
export function mapError(err: unknown, era: Era): MappedError {
  if (err instanceof ProtocolError)
    return refused({ error: rpc(err.code, err.message, err.data), httpStatus: err.httpStatus }, era);
  if (err instanceof McpProtocolError)
    return refused({ error: rpc(err.code, err.message, err.data), httpStatus: 200 }, era);
  if (err instanceof SessionError)
    return refused({ error: rpc(JSONRPC.SESSION_NOT_FOUND, 'Session not found'), httpStatus: 404 }, era);
  if (err instanceof RequestStateError) {
    return refused(
      { error: rpc(JSONRPC.INVALID_PARAMS, `Invalid requestState: ${err.message}`), httpStatus: 400 },
      era,
    );
  }
  if (err instanceof Error) {
    for (const m of extraMappers) {
      const mapped = m(err, era);
      if (mapped) return refused(mapped, era);
    }
  }
  const id = correlationId();
  if (isDatabaseUnavailable(err)) {
    noteRetryableFault();
    // One line, no stack: during an outage every request lands here, and readiness already says why.
    logger.warn(`database fault, retryable [${id}]: ${err instanceof Error ? err.message : String(err)}`);
    return {
      error: rpc(
        JSONRPC.INTERNAL_ERROR,
        `Service unavailable: the database cannot serve this request now; retry shortly (correlation id ${id})`,
      ),
      httpStatus: 503,
    };
  }
  logger.error(
    `unhandled error [${id}]: ${err instanceof Error ? err.message : String(err)}`,
    err instanceof Error ? err.stack : undefined,
  );
  return { error: rpc(JSONRPC.INTERNAL_ERROR, internalErrorText(id)), httpStatus: 200 };
}

/**
 * A refusal caused by the client (bad params, unknown task, missing session...): one warn line, no stack,
 * since the stack only shows where the server noticed the client's mistake.
 */
function refused(mapped: MappedError, era: Era): MappedError {
  if (mapped.error.code !== JSONRPC.INTERNAL_ERROR) {
    logger.warn(`${era} request refused (${mapped.error.code}): ${mapped.error.message}`);
  }
  return mapped;
}

/** Tool dispatch refusals as the wire shows them. */
registerErrorMapper((err, era) => {
  if (!(err instanceof ToolDispatchError)) return undefined;
  switch (err.code) {
    case ToolDispatchErrorCode.TOOL_NOT_FOUND:
    case ToolDispatchErrorCode.PROMPT_NOT_FOUND:
      return { error: rpc(JSONRPC.INVALID_PARAMS, err.message, err.data), httpStatus: 200 };
    case ToolDispatchErrorCode.INVALID_ARGUMENTS:
      return { error: rpc(JSONRPC.INVALID_PARAMS, err.message, err.data), httpStatus: 200 };
    case ToolDispatchErrorCode.RESOURCE_NOT_FOUND:
      // 2025-11-25 names -32002 for an unknown resource; 2026-07-28 (SEP-2164) uses -32602 with data.uri.
      return {
        error: rpc(
          era === 'legacy' ? RESOURCE_NOT_FOUND_LEGACY : JSONRPC.INVALID_PARAMS,
          err.message,
          err.data,
        ),
        httpStatus: 200,
      };
    case ToolDispatchErrorCode.INSUFFICIENT_SCOPE:
      return { error: rpc(JSONRPC.SERVER_ERROR, `Forbidden: ${err.message}`, err.data), httpStatus: 403 };
    case ToolDispatchErrorCode.INVALID_RESULT:
    case ToolDispatchErrorCode.INVALID_DEFINITION:
      logger.error(`tool dispatch failure: ${err.message}`);
      return {
        error: rpc(JSONRPC.INTERNAL_ERROR, 'Internal error: the tool produced an invalid result'),
        httpStatus: 200,
      };
  }
});

/** Task registry refusals. A foreign task and a missing one get the very same answer. */
registerErrorMapper((err) => {
  if (!(err instanceof TaskError)) return undefined;
  switch (err.code) {
    case TaskErrorCode.TASK_NOT_FOUND:
      return { error: rpc(JSONRPC.INVALID_PARAMS, 'Task not found'), httpStatus: 200 };
    case TaskErrorCode.TASK_TERMINAL:
    case TaskErrorCode.INVALID_CURSOR:
    case TaskErrorCode.INPUT_LIMIT:
    case TaskErrorCode.INVALID_ARGUMENT:
      return { error: rpc(JSONRPC.INVALID_PARAMS, err.message), httpStatus: 200 };
    case TaskErrorCode.LIMIT_EXCEEDED:
    case TaskErrorCode.TASK_BUSY:
      return { error: rpc(JSONRPC.SERVER_ERROR, err.message), httpStatus: 200 };
  }
});
