import { JSONRPC } from '../protocol/json-rpc.js';
import { ProtocolError } from '../protocol/protocol.errors.js';

/** The quota names: the `quota` label of mcp_quota_rejections_total and `data.quota` of the error. */
export type QuotaName =
  | 'address_rate'
  | 'principal_rate'
  | 'sessions'
  | 'streams'
  | 'in_flight'
  | 'result_waiters'
  | 'subscriptions'
  | 'task_params_bytes'
  | 'task_result_bytes'
  | 'task_input_bytes'
  | 'session_client_bytes'
  | 'client_response_bytes'
  | 'retained_tasks';

/**
 * A request refused by a quota or rate limit. JSON-RPC -32000 with `data: { quota, limit, setting }` (and
 * `retryAfterSeconds` for rates and concurrency, also sent as the Retry-After header of the 429).
 */
export class QuotaExceededError extends ProtocolError {
  constructor(
    readonly quota: QuotaName,
    message: string,
    limit: number,
    setting: string,
    httpStatus: number,
    readonly retryAfterSeconds?: number,
  ) {
    super(JSONRPC.SERVER_ERROR, message, httpStatus, {
      quota,
      limit,
      setting,
      ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
    });
    this.name = 'QuotaExceededError';
  }
}
