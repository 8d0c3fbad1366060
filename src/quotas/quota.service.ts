import { Injectable } from '@nestjs/common';
import { Counter } from 'prom-client';
import { CheckpointError, serialiseCheckpoint } from '../tool-dispatch/checkpoint.js';
import { QuotasConfig } from './quotas.config.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { QuotaErrorCode, QuotaExceededError, type QuotaName } from './quota.errors.js';
import { TokenBuckets } from './token-bucket.js';

const ALL_QUOTAS: QuotaName[] = [
  'address_rate',
  'principal_rate',
  'sessions',
  'streams',
  'in_flight',
  'result_waiters',
  'subscriptions',
  'task_params_bytes',
  'task_result_bytes',
  'task_input_bytes',
  'task_checkpoint_bytes',
  'session_client_bytes',
  'client_response_bytes',
  'retained_tasks',
];

/** Concurrency quotas counted in memory on this instance, with the setting that bounds each. */
type Lease = 'streams' | 'in_flight' | 'result_waiters';
const LEASE_SETTING = {
  streams: 'QUOTA_STREAMS_PER_PRINCIPAL',
  in_flight: 'QUOTA_IN_FLIGHT_PER_PRINCIPAL',
  result_waiters: 'QUOTA_RESULT_WAITERS_PER_PRINCIPAL',
} as const satisfies Record<Lease, keyof QuotasConfig>;
const LEASE_WHAT: Record<Lease, string> = {
  streams: 'open SSE streams',
  in_flight: 'requests in flight',
  result_waiters: 'blocked tasks/result calls',
};

/**
 * The answer a caller of this service asks for (429 retry later, 413 too large, 200 inside the JSON-RPC
 * answer), kept by the error as its domain code; quota.error-mapper.ts turns the code back into the status.
 */
type QuotaRefusalStatus = 200 | 413 | 429;
const REFUSAL_CODE: Record<QuotaRefusalStatus, QuotaErrorCode> = {
  200: QuotaErrorCode.EXCEEDED,
  413: QuotaErrorCode.TOO_LARGE,
  429: QuotaErrorCode.TOO_MANY,
};

/** JSON size of a value in bytes (what PostgreSQL's jsonb column will hold, near enough). */
export function jsonBytes(value: unknown): number {
  return value === undefined ? 0 : Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
}

/**
 * Per-principal quotas and rate limits of this instance (README "Limits and quotas"). Rates and concurrency
 * are counted in memory, per instance: a client spread over N instances behind a balancer gets up to N times
 * each limit, in exchange for no shared state on the hot path. Counts kept in the database (live sessions,
 * retained tasks) are exact across instances and checked where they are written.
 *
 * Every refusal is counted in mcp_quota_rejections_total{quota} and thrown as a QuotaExceededError.
 * Nothing here is keyed by anything but an authenticated principal id or a socket address, and every map
 * holds only live entries (leases) or is bounded (token buckets).
 */
@Injectable()
export class QuotaService {
  private readonly rejections: Counter<'quota'>;
  private readonly principalRate: TokenBuckets;
  private readonly addressRate: TokenBuckets;
  /** `${lease}\0${principalId}` → leases held; an entry is deleted when its count returns to 0. */
  private readonly held = new Map<string, number>();

  constructor(
    private readonly config: QuotasConfig,
    metrics: MetricsService,
  ) {
    this.rejections = new Counter({
      name: 'mcp_quota_rejections_total',
      help: 'Requests refused by a quota or rate limit, by quota.',
      labelNames: ['quota'] as const,
      registers: [metrics.registry],
    });
    for (const quota of ALL_QUOTAS) this.rejections.inc({ quota }, 0);
    this.principalRate = new TokenBuckets(config.RATE_LIMIT_PRINCIPAL_RPS, config.RATE_LIMIT_PRINCIPAL_BURST);
    this.addressRate = new TokenBuckets(config.RATE_LIMIT_ADDRESS_RPS, config.RATE_LIMIT_ADDRESS_BURST);
  }

  /** Counts a refusal made elsewhere (a database-checked quota) and returns the error to throw. */
  refuse(
    quota: QuotaName,
    message: string,
    limit: number,
    setting: string,
    httpStatus: QuotaRefusalStatus = 200,
    retryAfterSeconds?: number,
  ): QuotaExceededError {
    this.rejections.inc({ quota });
    return new QuotaExceededError(
      REFUSAL_CODE[httpStatus],
      quota,
      message,
      limit,
      setting,
      retryAfterSeconds,
    );
  }

  /**
   * The JSON text a task checkpoint is stored as (serialiseCheckpoint, capped by QUOTA_TASK_CHECKPOINT_BYTES).
   * Every checkpoint a handler saves passes here, inline or as a task, so a state over the cap is counted in
   * mcp_quota_rejections_total{quota="task_checkpoint_bytes"} in one place; the CheckpointError is rethrown
   * for the tool to see. A state that is not JSON is refused the same way but is not a quota, so not counted.
   */
  checkpointJson(state: unknown): string {
    try {
      return serialiseCheckpoint(state, this.config.QUOTA_TASK_CHECKPOINT_BYTES);
    } catch (err) {
      if (err instanceof CheckpointError && err.quota) this.rejections.inc({ quota: err.quota });
      throw err;
    }
  }

  /** Before authentication: one token from the client address's bucket, or a 429. */
  checkAddressRate(address: string): void {
    const waitMs = this.addressRate.take(address);
    if (waitMs > 0) {
      throw this.refuse(
        'address_rate',
        'Too Many Requests: this client address exceeded its request rate',
        this.config.RATE_LIMIT_ADDRESS_RPS,
        'RATE_LIMIT_ADDRESS_RPS',
        429,
        Math.max(1, Math.ceil(waitMs / 1000)),
      );
    }
  }

  /** After authentication: one token from the principal's bucket, or a 429. */
  checkPrincipalRate(principalId: string): void {
    const waitMs = this.principalRate.take(principalId);
    if (waitMs > 0) {
      throw this.refuse(
        'principal_rate',
        'Too Many Requests: this caller exceeded its request rate',
        this.config.RATE_LIMIT_PRINCIPAL_RPS,
        'RATE_LIMIT_PRINCIPAL_RPS',
        429,
        Math.max(1, Math.ceil(waitMs / 1000)),
      );
    }
  }

  /**
   * Takes one lease of a concurrency quota for the principal, or refuses with a 429. `force` counts it even
   * past the limit (an SSE answer to a request already accepted is never cut off). The returned release is
   * idempotent.
   */
  acquire(lease: Lease, principalId: string, force = false): () => void {
    const setting = LEASE_SETTING[lease];
    const limit = this.config[setting];
    const k = `${lease}\u0000${principalId}`;
    const now = this.held.get(k) ?? 0;
    if (!force && now >= limit) {
      throw this.refuse(
        lease,
        `Too many ${LEASE_WHAT[lease]} for this caller (${setting} = ${limit})`,
        limit,
        setting,
        429,
        1,
      );
    }
    this.held.set(k, now + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.held.get(k) ?? 1) - 1;
      if (left <= 0) this.held.delete(k);
      else this.held.set(k, left);
    };
  }

  /** Leases the principal holds now (tests and diagnostics). */
  holding(lease: Lease, principalId: string): number {
    return this.held.get(`${lease}\u0000${principalId}`) ?? 0;
  }

  /** Principals with any lease held (0 when idle: the map never keeps released entries). */
  get leaseKeys(): number {
    return this.held.size;
  }

  /** Refuses a value whose JSON is larger than the quota allows (HTTP status of the error: 200 by default). */
  checkBytes(
    quota: 'task_params_bytes' | 'task_input_bytes' | 'session_client_bytes',
    value: unknown,
    httpStatus: QuotaRefusalStatus = 200,
  ): void {
    const setting = (
      {
        task_params_bytes: 'QUOTA_TASK_PARAMS_BYTES',
        task_input_bytes: 'QUOTA_TASK_INPUT_BYTES',
        session_client_bytes: 'QUOTA_SESSION_CLIENT_BYTES',
      } as const
    )[quota];
    const limit = this.config[setting];
    const size = jsonBytes(value);
    if (size > limit) {
      throw this.refuse(
        quota,
        `Too large: ${size} bytes exceed ${setting} = ${limit}`,
        limit,
        setting,
        httpStatus,
      );
    }
  }

  /** Whether a task result fits QUOTA_TASK_RESULT_BYTES; counts the refusal when it does not. */
  resultFits(result: unknown): boolean {
    if (jsonBytes(result) <= this.config.QUOTA_TASK_RESULT_BYTES) return true;
    this.rejections.inc({ quota: 'task_result_bytes' });
    return false;
  }

  get resultLimit(): number {
    return this.config.QUOTA_TASK_RESULT_BYTES;
  }

  checkSubscriptions(held: number): void {
    const limit = this.config.QUOTA_SUBSCRIPTIONS_PER_SESSION;
    if (held >= limit) {
      throw this.refuse(
        'subscriptions',
        `Too many resource subscriptions in this session (QUOTA_SUBSCRIPTIONS_PER_SESSION = ${limit})`,
        limit,
        'QUOTA_SUBSCRIPTIONS_PER_SESSION',
      );
    }
  }
}
