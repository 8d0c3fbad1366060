/** Either character that pg's escaping doubles. */
const NEEDS_ESCAPING = /['\\]/;
const ESCAPED = /['\\]/g;

/**
 * `value` as a quoted SQL literal, exactly as pg's `escapeLiteral` writes it: quotes and backslashes
 * doubled, and ` E'...'` when there was a backslash. pg builds its answer one character at a time, which
 * showed in the profiles of the hot write paths (every inlined value and every audit row goes through
 * here, some of them JSON documents); the usual string, with neither character, is quoted as it is.
 */
export function sqlLiteral(value: string): string {
  if (!NEEDS_ESCAPING.test(value)) return `'${value}'`;
  const body = value.replace(ESCAPED, (c) => c + c);
  return value.includes('\\') ? ` E'${body}'` : `'${body}'`;
}
