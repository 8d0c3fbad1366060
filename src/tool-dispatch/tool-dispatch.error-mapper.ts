import { Logger } from '@nestjs/common';
import type { RefusalEra, WireRefusal } from '../common/error-mappers.js';
import { JSONRPC } from '../common/json-rpc-codes.js';
import { ToolDispatchErrorCode, type ToolDispatchError } from './tool-dispatch.errors.js';

const logger = new Logger('McpErrors');

/** Tool dispatch refusals as the wire shows them. */
export function mapToolDispatchError(err: ToolDispatchError, era: RefusalEra): WireRefusal {
  switch (err.code) {
    case ToolDispatchErrorCode.TOOL_NOT_FOUND:
    case ToolDispatchErrorCode.PROMPT_NOT_FOUND:
    case ToolDispatchErrorCode.INVALID_ARGUMENTS:
      return { code: JSONRPC.INVALID_PARAMS, message: err.message, data: err.data };
    case ToolDispatchErrorCode.RESOURCE_NOT_FOUND:
      // Legacy (2025-11-25) names -32002 for an unknown resource; modern (2026-07-28, SEP-2164) uses -32602
      // with data.uri.
      return {
        code: era === 'legacy' ? JSONRPC.RESOURCE_NOT_FOUND_LEGACY : JSONRPC.INVALID_PARAMS,
        message: err.message,
        data: err.data,
      };
    case ToolDispatchErrorCode.INSUFFICIENT_SCOPE:
      return {
        code: JSONRPC.SERVER_ERROR,
        message: `Forbidden: ${err.message}`,
        data: err.data,
        httpStatus: 403,
      };
    case ToolDispatchErrorCode.INVALID_RESULT:
    case ToolDispatchErrorCode.INVALID_DEFINITION:
      logger.error(`tool dispatch failure: ${err.message}`);
      return { code: JSONRPC.INTERNAL_ERROR, message: 'Internal error: the tool produced an invalid result' };
  }
}
