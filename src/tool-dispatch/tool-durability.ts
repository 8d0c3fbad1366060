import { isIntIn, isPlainObject, unknownKeys } from './declaration-checks.js';
import type { TaskSupport } from './tool-context.js';
import { NO_DURABILITY, type DurabilityPolicy, type NormalisedRetryPolicy } from './tool-dispatch.types.js';

/** Defaults of a retry policy (RetryPolicy). */
export const DEFAULT_BACKOFF_FACTOR = 2;
export const DEFAULT_MAX_DELAY_MS = 60000;
/** Runs a resumable tool gets when it declares no retry policy: hand-overs are free, lost workers are not. */
export const DEFAULT_RESUMABLE_ATTEMPTS = 3;

const MAX_ATTEMPTS = 100;
/** A day: no backoff wait, and no declared run, is meant to be longer than what a ttl can cover. */
const MAX_DELAY_MS = 86_400_000;
const MAX_RUN_MS = 30 * 86_400_000;
const DURABILITY_KEYS = ['resumable', 'retry', 'maxRunMs'];
const RETRY_KEYS = ['maxAttempts', 'initialDelayMs', 'factor', 'maxDelayMs', 'retryOn'];

/**
 * `McpToolOptions.durability` validated and normalised, each mistake pushed onto `problems` (the explorer
 * stops the boot with them) with the declaration's path, e.g. `durability.retry.maxAttempts must be an
 * integer from 1 to 100`. A tool that declares nothing gets NO_DURABILITY: today's behaviour exactly.
 */
export function durabilityOf(
  raw: unknown,
  taskSupport: TaskSupport,
  where: string,
  problems: string[],
): DurabilityPolicy {
  if (raw === undefined) return NO_DURABILITY;
  const at = `${where}: durability`;
  if (!isPlainObject(raw)) {
    problems.push(`${at} must be an object ({ resumable?, retry?, maxRunMs? })`);
    return NO_DURABILITY;
  }
  const before = problems.length;
  unknownKeys(raw, DURABILITY_KEYS, at, problems);
  if (taskSupport === 'forbidden') {
    problems.push(`${at} applies to task runs only: declare taskSupport 'optional' or 'required'`);
  }
  const { resumable, retry, maxRunMs } = raw;
  if (resumable !== undefined && typeof resumable !== 'boolean') {
    problems.push(`${at}.resumable must be a boolean`);
  }
  if (maxRunMs !== undefined && !isIntIn(maxRunMs, 1, MAX_RUN_MS)) {
    problems.push(`${at}.maxRunMs must be an integer number of ms from 1 to ${MAX_RUN_MS} (30 days)`);
  }
  let policy: NormalisedRetryPolicy | undefined;
  if (retry !== undefined) policy = retryPolicyOf(retry, `${at}.retry`, problems);
  if (problems.length > before) return NO_DURABILITY;
  const isResumable = resumable === true;
  return Object.freeze({
    resumable: isResumable,
    maxAttempts: policy?.maxAttempts ?? (isResumable ? DEFAULT_RESUMABLE_ATTEMPTS : 1),
    ...(policy ? { retry: policy } : {}),
    ...(typeof maxRunMs === 'number' ? { maxRunMs } : {}),
  });
}

function retryPolicyOf(raw: unknown, at: string, problems: string[]): NormalisedRetryPolicy | undefined {
  if (!isPlainObject(raw)) {
    problems.push(
      `${at} must be an object ({ maxAttempts, initialDelayMs, factor?, maxDelayMs?, retryOn? })`,
    );
    return undefined;
  }
  const before = problems.length;
  unknownKeys(raw, RETRY_KEYS, at, problems);
  const { maxAttempts, initialDelayMs, retryOn } = raw;
  const factor = raw.factor ?? DEFAULT_BACKOFF_FACTOR;
  const maxDelayMs = raw.maxDelayMs ?? DEFAULT_MAX_DELAY_MS;
  if (!isIntIn(maxAttempts, 1, MAX_ATTEMPTS)) {
    problems.push(
      `${at}.maxAttempts must be an integer from 1 to ${MAX_ATTEMPTS} (runs in all, the first included)`,
    );
  }
  if (!isIntIn(initialDelayMs, 0, MAX_DELAY_MS)) {
    problems.push(`${at}.initialDelayMs must be an integer number of ms from 0 to ${MAX_DELAY_MS}`);
  }
  if (typeof factor !== 'number' || !Number.isFinite(factor) || factor < 1 || factor > 100) {
    problems.push(`${at}.factor must be a number from 1 to 100`);
  }
  if (!isIntIn(maxDelayMs, 0, MAX_DELAY_MS)) {
    problems.push(`${at}.maxDelayMs must be an integer number of ms from 0 to ${MAX_DELAY_MS}`);
  } else if (isIntIn(initialDelayMs, 0, MAX_DELAY_MS) && maxDelayMs < initialDelayMs) {
    problems.push(`${at}.maxDelayMs (${maxDelayMs}) must not be below initialDelayMs (${initialDelayMs})`);
  }
  if (retryOn !== undefined && typeof retryOn !== 'function') {
    problems.push(`${at}.retryOn must be a function (error) => boolean`);
  }
  if (problems.length > before) return undefined;
  return Object.freeze({
    maxAttempts: maxAttempts as number,
    initialDelayMs: initialDelayMs as number,
    factor: factor as number,
    maxDelayMs: maxDelayMs as number,
    ...(retryOn ? { retryOn: retryOn as (error: unknown) => boolean } : {}),
  });
}
