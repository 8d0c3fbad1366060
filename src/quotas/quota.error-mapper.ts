import type { WireRefusal } from '../common/error-mappers.js';
import { JSONRPC } from '../common/json-rpc-codes.js';
import { QuotaErrorCode, type QuotaExceededError } from './quota.errors.js';

const STATUS: Record<QuotaErrorCode, number> = {
  [QuotaErrorCode.TOO_MANY]: 429,
  [QuotaErrorCode.TOO_LARGE]: 413,
  [QuotaErrorCode.EXCEEDED]: 200,
};

/**
 * A quota refusal on the wire: -32000 with `data: { quota, limit, setting[, retryAfterSeconds] }`, in both
 * eras. Also used as it is by the per-address rate check, which answers before any era is known.
 */
export function mapQuotaError(err: QuotaExceededError): WireRefusal {
  const { quota, limit, setting, retryAfterSeconds } = err;
  return {
    code: JSONRPC.SERVER_ERROR,
    message: err.message,
    data: { quota, limit, setting, ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }) },
    httpStatus: STATUS[err.code],
  };
}
