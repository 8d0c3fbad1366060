import { JsonRpcError } from '../common/json-rpc-error.js';
import { JSONRPC } from './json-rpc.js';

/**
 * An error the protocol layer answers with a specific JSON-RPC code and HTTP status: a wire error, raised by
 * the protocol and gateway code itself (domain errors of feature modules are mapped by their own mappers, see
 * common/error-mappers.ts). A JsonRpcError, so tool dispatch lets it through a handler untouched.
 */
export class ProtocolError extends JsonRpcError {
  constructor(
    code: number,
    message: string,
    readonly httpStatus = 200,
    data?: unknown,
  ) {
    super(code, message, data);
  }

  static invalidParams(message: string, data?: unknown, httpStatus = 200): ProtocolError {
    return new ProtocolError(JSONRPC.INVALID_PARAMS, message, httpStatus, data);
  }

  static methodNotFound(method: string, httpStatus = 200): ProtocolError {
    return new ProtocolError(JSONRPC.METHOD_NOT_FOUND, `Method not found: ${method}`, httpStatus);
  }

  static headerMismatch(message: string): ProtocolError {
    return new ProtocolError(JSONRPC.HEADER_MISMATCH, `Header mismatch: ${message}`, 400);
  }

  static missingCapability(
    required: Record<string, unknown>,
    message = 'Missing required client capability',
  ): ProtocolError {
    return new ProtocolError(JSONRPC.MISSING_REQUIRED_CLIENT_CAPABILITY, message, 400, {
      requiredCapabilities: required,
    });
  }
}
