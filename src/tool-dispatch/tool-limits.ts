import { isIntIn, isPlainObject, unknownKeys } from './declaration-checks.js';
import type { TaskSupport } from './tool-context.js';
import type { JsonSchema } from './tool-dispatch.types.js';

/**
 * What a tool declares about how many of its runs the whole cluster may have going (docs/tool-authoring.md,
 * "Sharing the queue"). Every run counts: a task's runs, its retries, a resumed run, and a 2026-07-28 call's
 * run inside its inline window. A call that would go over a limit waits as a `working` task whose
 * statusMessage names the limit.
 */
export interface ToolLimits {
  /** At most this many runs at once across all instances. */
  concurrency?: number;
  /** At most `concurrency` runs at once per value of the top-level argument `argument` (a customer id, a repo). */
  perKey?: { argument: string; concurrency: number };
  /** At most `starts` runs started in any `intervalMs` (a throttle for a rate-limited downstream). */
  rate?: { starts: number; intervalMs: number };
}

/** `McpToolOptions.limits` as the server applies it (validated at boot by the tool explorer). */
export interface LimitsPolicy {
  readonly concurrency?: number;
  readonly perKey?: Readonly<{ argument: string; concurrency: number }>;
  readonly rate?: Readonly<{ starts: number; intervalMs: number }>;
}

const LIMIT_KEYS = ['concurrency', 'perKey', 'rate'];
const MAX_CONCURRENCY = 10_000;
const MAX_INTERVAL_MS = 86_400_000;
/** A per-key value is stored with the task and compared as text; longer ones are refused at the call. */
export const MAX_LIMIT_KEY_LENGTH = 256;

/**
 * `McpToolOptions.limits` validated, each mistake pushed onto `problems` with the declaration's path (the
 * explorer stops the boot with them), e.g. `limits.perKey.argument "repo" is not a required string or
 * integer property of the input schema`. Undefined when the tool declares none.
 */
export function limitsOf(
  raw: unknown,
  taskSupport: TaskSupport,
  input: JsonSchema | undefined,
  where: string,
  problems: string[],
): LimitsPolicy | undefined {
  if (raw === undefined) return undefined;
  const at = `${where}: limits`;
  if (!isPlainObject(raw)) {
    problems.push(`${at} must be an object ({ concurrency?, perKey?, rate? })`);
    return undefined;
  }
  const before = problems.length;
  unknownKeys(raw, LIMIT_KEYS, at, problems);
  if (taskSupport === 'forbidden') {
    // A call over a limit waits as a task; a tool that can never be one has nowhere to wait.
    problems.push(`${at} needs a tool that can run as a task: declare taskSupport 'optional' or 'required'`);
  }
  if (Object.keys(raw).length === 0) problems.push(`${at} declares no limit (concurrency, perKey or rate)`);
  const { concurrency, perKey, rate } = raw;
  if (concurrency !== undefined && !isIntIn(concurrency, 1, MAX_CONCURRENCY)) {
    problems.push(`${at}.concurrency must be an integer from 1 to ${MAX_CONCURRENCY}`);
  }
  if (perKey !== undefined) perKeyOf(perKey, input, `${at}.perKey`, problems);
  if (rate !== undefined) {
    if (!isPlainObject(rate)) problems.push(`${at}.rate must be an object ({ starts, intervalMs })`);
    else {
      unknownKeys(rate, ['starts', 'intervalMs'], `${at}.rate`, problems);
      if (!isIntIn(rate.starts, 1, MAX_CONCURRENCY)) {
        problems.push(`${at}.rate.starts must be an integer from 1 to ${MAX_CONCURRENCY}`);
      }
      if (!isIntIn(rate.intervalMs, 1, MAX_INTERVAL_MS)) {
        problems.push(`${at}.rate.intervalMs must be an integer number of ms from 1 to ${MAX_INTERVAL_MS}`);
      }
    }
  }
  if (problems.length > before) return undefined;
  const p = perKey as { argument: string; concurrency: number } | undefined;
  const r = rate as { starts: number; intervalMs: number } | undefined;
  return Object.freeze({
    ...(concurrency !== undefined ? { concurrency: concurrency as number } : {}),
    ...(p ? { perKey: Object.freeze({ argument: p.argument, concurrency: p.concurrency }) } : {}),
    ...(r ? { rate: Object.freeze({ starts: r.starts, intervalMs: r.intervalMs }) } : {}),
  });
}

function perKeyOf(raw: unknown, input: JsonSchema | undefined, at: string, problems: string[]): void {
  if (!isPlainObject(raw)) {
    problems.push(`${at} must be an object ({ argument, concurrency })`);
    return;
  }
  unknownKeys(raw, ['argument', 'concurrency'], at, problems);
  if (!isIntIn(raw.concurrency, 1, MAX_CONCURRENCY)) {
    problems.push(`${at}.concurrency must be an integer from 1 to ${MAX_CONCURRENCY}`);
  }
  const arg = raw.argument;
  if (typeof arg !== 'string' || arg === '') {
    problems.push(`${at}.argument must name a top-level argument`);
    return;
  }
  // The key must be there on every call, and be a value with one obvious text form.
  const props = (input?.properties ?? {}) as Record<string, { type?: unknown } | undefined>;
  const required = Array.isArray(input?.required) ? (input.required as unknown[]) : [];
  const type = props[arg]?.type;
  if (!required.includes(arg) || !(type === 'string' || type === 'integer')) {
    problems.push(
      `${at}.argument ${JSON.stringify(arg)} must be a required string or integer property of the input schema`,
    );
  }
}

/**
 * The per-key value of a call's arguments (validated against the input schema already), as stored with its
 * task; '' for a tool without a per-key limit. Undefined when the value is too long to be a key.
 */
export function limitKeyOf(
  limits: LimitsPolicy,
  args: Record<string, unknown> | undefined,
): string | undefined {
  if (!limits.perKey) return '';
  const v = args?.[limits.perKey.argument];
  const text = typeof v === 'string' ? v : typeof v === 'number' ? String(v) : '';
  return text.length > MAX_LIMIT_KEY_LENGTH ? undefined : text;
}
