import type { JsonSchema } from '../tool-dispatch.types.js';

export type ValidationOutcome = { ok: true; value: unknown } | { ok: false; problems: string[] };

/** One compiled input (or output) contract: the schema clients see and the check that enforces it. */
export interface InputValidator {
  readonly schema: JsonSchema;
  /** `root` names the value in messages, e.g. `arguments` → `arguments.count must be an integer`. */
  validate(value: unknown, root: string): Promise<ValidationOutcome>;
}

/** `a/0/b` style path segments rendered as `root.a[0].b`. */
export function renderPath(root: string, segments: readonly string[]): string {
  return segments.reduce((path, s) => (/^\d+$/.test(s) ? `${path}[${s}]` : `${path}.${s}`), root);
}

/** Problems an error answer lists at most; the rest are counted, so the answer stays small. */
export const MAX_PROBLEMS = 20;
/** Longest problem text: paths name client-chosen keys, which may be long. */
export const MAX_PROBLEM_CHARS = 200;

/**
 * The problems an answer carries: the first MAX_PROBLEMS, each cut to MAX_PROBLEM_CHARS, and a last line
 * counting the others. An answer's size then depends on neither the number nor the length of the client's
 * keys.
 */
export function capProblems(problems: readonly string[], total = problems.length): string[] {
  const shown = problems
    .slice(0, MAX_PROBLEMS)
    .map((p) => (p.length > MAX_PROBLEM_CHARS ? `${p.slice(0, MAX_PROBLEM_CHARS - 1)}…` : p));
  const more = total - shown.length;
  return more > 0 ? [...shown, `and ${more} more`] : shown;
}
