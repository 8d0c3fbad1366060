import { DomainError } from '../common/domain-error.js';

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
  | 'task_checkpoint_bytes'
  | 'session_client_bytes'
  | 'client_response_bytes'
  | 'retained_tasks';

/** How a quota refused: what the caller can do about it (the edge answers each with its own HTTP status). */
export enum QuotaErrorCode {
  /** Too many at once or too fast (rates, concurrency, live sessions): retry later; HTTP 429. */
  TOO_MANY = 'TOO_MANY',
  /** A request body larger than its quota, refused before anything was kept; HTTP 413. */
  TOO_LARGE = 'TOO_LARGE',
  /** A size or count quota of one JSON-RPC call, refused inside its answer; HTTP 200. */
  EXCEEDED = 'EXCEEDED',
}

/**
 * A request refused by a quota or rate limit. On the wire (quota.error-mapper.ts): JSON-RPC -32000 with
 * `data: { quota, limit, setting }` (and `retryAfterSeconds` for rates and concurrency, also sent as the
 * Retry-After header of the 429).
 */
export class QuotaExceededError extends DomainError<QuotaErrorCode> {
  constructor(
    code: QuotaErrorCode,
    readonly quota: QuotaName,
    message: string,
    readonly limit: number,
    readonly setting: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(code, message);
  }
}
