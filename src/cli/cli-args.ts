/** Exit codes of the admin CLI (documented in the README's CLI section). */
export const ExitCode = {
  OK: 0,
  /** Not found, a database error, or bad configuration. */
  FAILED: 1,
  /** The command line is wrong; the usage goes to stderr. */
  USAGE: 2,
  /** Understood and valid, but nothing was done: the task had already finished, another janitor held the lock. */
  NOT_APPLIED: 3,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** A command-line mistake; printed with the usage and exit code 2. */
export class CliUsageError extends Error {}

export interface ParsedArgs {
  flags: Map<string, string | true>;
  words: string[];
}

/**
 * `--name x`, `--name=x` and boolean `--json` → flags; everything else → positional words. Which flags take a
 * value is declared by the caller, so `--json ID` never swallows the id. `--` ends the options: every word
 * after it is positional, which is how an id that starts with `-` is given (1 in 64 task and session ids
 * minted before newTaskId and SessionsService.newId stopped drawing one; they still exist in older databases).
 */
export function parseArgs(args: readonly string[], valueFlags: readonly string[]): ParsedArgs {
  const flags = new Map<string, string | true>();
  const words: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--') {
      words.push(...args.slice(i + 1));
      break;
    }
    const eq = /^--([a-z][a-z-]*)=(.*)$/.exec(a);
    if (eq) {
      flags.set(eq[1], eq[2]);
      continue;
    }
    const flag = /^--([a-z][a-z-]*)$/.exec(a);
    if (!flag) {
      if (a.startsWith('-') && a !== '-') {
        throw new CliUsageError(`unknown option ${a} (an id that starts with - goes after --: show -- ${a})`);
      }
      words.push(a);
      continue;
    }
    if (valueFlags.includes(flag[1])) {
      const v = args[i + 1];
      if (v === undefined || v.startsWith('--')) {
        throw new CliUsageError(
          `--${flag[1]} needs a value (one that starts with -- goes as --${flag[1]}=VALUE)`,
        );
      }
      flags.set(flag[1], v);
      i++;
    } else {
      flags.set(flag[1], true);
    }
  }
  return { flags, words };
}

/** Refuses flags the command does not know (a typo must not silently widen a cancel). */
export function allowOnly(parsed: ParsedArgs, known: readonly string[]): void {
  for (const name of parsed.flags.keys()) {
    if (!known.includes(name)) throw new CliUsageError(`unknown option --${name}`);
  }
}

export function stringFlag(parsed: ParsedArgs, name: string): string | undefined {
  const v = parsed.flags.get(name);
  if (v === undefined) return undefined;
  if (v === true || v.trim() === '') throw new CliUsageError(`--${name} needs a value`);
  return v.trim();
}

export function boolFlag(parsed: ParsedArgs, name: string): boolean {
  const v = parsed.flags.get(name);
  if (v === undefined) return false;
  if (v === true) return true;
  throw new CliUsageError(`--${name} takes no value`);
}

export function intFlag(
  parsed: ParsedArgs,
  name: string,
  min: number,
  max: number,
  fallback: number,
): number {
  const v = stringFlag(parsed, name);
  if (v === undefined) return fallback;
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
    throw new CliUsageError(`--${name} must be an integer from ${min} to ${max}`);
  }
  return Number(v);
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `90s`, `15m`, `2h`, `7d`, `500ms` → milliseconds. */
export function parseDuration(text: string, what: string): number {
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(text.trim());
  if (!m) throw new CliUsageError(`${what} must be a duration such as 90s, 15m, 2h or 7d`);
  return Number(m[1]) * UNIT_MS[m[2]];
}

/** Exactly `count` positional words after the sub-command, or a usage error naming them. */
export function positional(parsed: ParsedArgs, names: readonly string[]): string[] {
  const rest = parsed.words.slice(1);
  if (rest.length < names.length) throw new CliUsageError(`missing ${names.slice(rest.length).join(', ')}`);
  if (rest.length > names.length) throw new CliUsageError(`unexpected argument ${rest[names.length]}`);
  return rest;
}
