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
