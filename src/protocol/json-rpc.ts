/** JSON-RPC 2.0 message shapes and the standard and MCP error codes. */
import { JSONRPC } from '../common/json-rpc-codes.js';
import { isJsonObject } from '../common/json.js';

export type JsonRpcId = string | number;

export interface JsonRpcRequest {
  jsonrpc: '2.0';
  id: JsonRpcId;
  method: string;
  params?: Record<string, unknown>;
}

export interface JsonRpcNotification {
  jsonrpc: '2.0';
  method: string;
  params?: Record<string, unknown>;
}

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

export interface JsonRpcResponse {
  jsonrpc: '2.0';
  id: JsonRpcId | null;
  result?: Record<string, unknown>;
  error?: JsonRpcErrorObject;
}

export type IncomingMessage =
  | { kind: 'request'; message: JsonRpcRequest }
  | { kind: 'notification'; message: JsonRpcNotification }
  | { kind: 'response'; message: JsonRpcResponse };

// The numbers live in common/ so that each feature's error mapper can use them without importing protocol/.
export { JSONRPC };

function isId(v: unknown): v is JsonRpcId {
  return (typeof v === 'string' && v.length <= 256) || (typeof v === 'number' && Number.isFinite(v));
}

/** Why a body is not a single valid JSON-RPC message; the id is echoed when one could be read. */
export class InvalidMessageError extends Error {
  constructor(
    message: string,
    readonly id: JsonRpcId | null,
  ) {
    super(message);
  }
}

/** Classifies one parsed JSON body. Batches are refused by the caller before this point. */
export function classifyMessage(body: unknown): IncomingMessage {
  if (!isJsonObject(body)) throw new InvalidMessageError('Invalid Request: expected a JSON-RPC object', null);
  const id = isId(body.id) ? body.id : null;
  if (body.jsonrpc !== '2.0') throw new InvalidMessageError('Invalid Request: jsonrpc must be "2.0"', id);
  if ('method' in body) {
    if (typeof body.method !== 'string' || body.method.length === 0 || body.method.length > 256) {
      throw new InvalidMessageError('Invalid Request: method must be a non-empty string', id);
    }
    if (body.params !== undefined && !isJsonObject(body.params)) {
      throw new InvalidMessageError('Invalid Request: params must be an object', id);
    }
    if ('id' in body) {
      if (!isId(body.id))
        throw new InvalidMessageError('Invalid Request: id must be a string or a number', null);
      return { kind: 'request', message: body as unknown as JsonRpcRequest };
    }
    return { kind: 'notification', message: body as unknown as JsonRpcNotification };
  }
  if ('result' in body || 'error' in body) {
    if (!isId(body.id)) throw new InvalidMessageError('Invalid Request: a response needs an id', null);
    if ('result' in body && !isJsonObject(body.result)) {
      throw new InvalidMessageError('Invalid Request: result must be an object', id);
    }
    // JSON-RPC 2.0 §5.1: the code is an integer and the message a string. A code like 7000000.5 would be
    // relayed to whoever waits for the answer, and a message of any other type would become its text.
    if (
      'error' in body &&
      (!isJsonObject(body.error) ||
        !Number.isSafeInteger(body.error.code) ||
        typeof body.error.message !== 'string')
    ) {
      throw new InvalidMessageError(
        'Invalid Request: error must be an object with an integer code and a string message',
        id,
      );
    }
    return { kind: 'response', message: body as unknown as JsonRpcResponse };
  }
  throw new InvalidMessageError('Invalid Request: neither a request, a notification nor a response', id);
}

/**
 * The error codes this server knows the meaning of: JSON-RPC's own and MCP's. Anything else (a tool's own
 * code, a client's answer to an elicitation) is still relayed, but counted as `other` wherever a code
 * becomes a metric label, so a client cannot mint label values.
 */
export const KNOWN_ERROR_CODES: ReadonlySet<number> = new Set(Object.values(JSONRPC));

export function errorResponse(id: JsonRpcId | null, error: JsonRpcErrorObject): JsonRpcResponse {
  return { jsonrpc: '2.0', id, error };
}

export function resultResponse(id: JsonRpcId, result: Record<string, unknown>): JsonRpcResponse {
  return { jsonrpc: '2.0', id, result };
}
