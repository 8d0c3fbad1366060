import {
  correlationId,
  internalErrorText,
  isDatabaseUnavailable,
  noteRetryableFault,
} from '../common/internal-fault.js';
import { Logger } from '@nestjs/common';
import { DomainError } from '../common/domain-error.js';
import { errorMessage } from '../common/error-message.js';
import { errorMapperFor, type WireRefusal } from '../common/error-mappers.js';
import { JsonRpcError } from '../common/json-rpc-error.js';
import { JSONRPC, type JsonRpcErrorObject } from './json-rpc.js';
import { ProtocolError } from './protocol.errors.js';
import type { Era } from './request-context.js';
import { RequestStateError } from './request-state.js';

const logger = new Logger('McpErrors');

export interface MappedError {
  error: JsonRpcErrorObject;
  httpStatus: number;
}

/** Longest error message an answer (and the refusal's log line) carries, whatever text went into it. */
const MAX_MESSAGE_CHARS = 2048;

function rpc(code: number, text: string, data?: unknown): JsonRpcErrorObject {
  const message = text.length > MAX_MESSAGE_CHARS ? `${text.slice(0, MAX_MESSAGE_CHARS - 1)}…` : text;
  return data === undefined ? { code, message } : { code, message, data };
}

/**
 * The one place that turns any error into a JSON-RPC error and an HTTP status: wire errors (ProtocolError,
 * the tool author's McpProtocolError) as they are, domain errors through the mapper their feature registered
 * (common/error-mappers.ts), anything else as an internal error with a correlation id.
 */
export function mapError(err: unknown, era: Era): MappedError {
  if (err instanceof ProtocolError)
    return refused({ error: rpc(err.code, err.message, err.data), httpStatus: err.httpStatus }, era);
  if (err instanceof JsonRpcError)
    return refused({ error: rpc(err.code, err.message, err.data), httpStatus: 200 }, era);
  if (err instanceof RequestStateError) {
    return refused(
      { error: rpc(JSONRPC.INVALID_PARAMS, `Invalid requestState: ${err.message}`), httpStatus: 400 },
      era,
    );
  }
  if (err instanceof DomainError) {
    const domain = err as DomainError;
    const wire = errorMapperFor(domain)?.(domain, era);
    if (wire) return refused(fromWire(wire), era);
  }
  const id = correlationId();
  if (isDatabaseUnavailable(err)) {
    noteRetryableFault();
    // One line, no stack: during an outage every request lands here, and readiness already says why.
    logger.warn(`database fault, retryable [${id}]: ${errorMessage(err)}`);
    return {
      error: rpc(
        JSONRPC.INTERNAL_ERROR,
        `Service unavailable: the database cannot serve this request now; retry shortly (correlation id ${id})`,
      ),
      httpStatus: 503,
    };
  }
  logger.error(`unhandled error [${id}]: ${errorMessage(err)}`, err instanceof Error ? err.stack : undefined);
  return { error: rpc(JSONRPC.INTERNAL_ERROR, internalErrorText(id)), httpStatus: 200 };
}

function fromWire(wire: WireRefusal): MappedError {
  return { error: rpc(wire.code, wire.message, wire.data), httpStatus: wire.httpStatus ?? 200 };
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
