import type { WireRefusal } from '../common/error-mappers.js';
import { JSONRPC } from '../common/json-rpc-codes.js';
import type { SessionError } from './sessions.errors.js';

/** Legacy (2025-11-25) sessions only: -32001 "Session not found" with HTTP 404, whatever the reason. */
export function mapSessionError(_err: SessionError): WireRefusal {
  return { code: JSONRPC.SESSION_NOT_FOUND, message: 'Session not found', httpStatus: 404 };
}
