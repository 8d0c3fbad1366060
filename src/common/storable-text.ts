/**
 * Text PostgreSQL can never store, whatever the retry: a NUL character (text and jsonb both refuse it, and
 * inlined in a simple-protocol query it even ends the message, which the server takes for a protocol
 * violation) and a UTF-16 surrogate without its pair (it has no UTF-8 form, so jsonb refuses it). Known at
 * the edge for what clients send, and before a worker's write for what tools return.
 */
const NUL = '\u0000';
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/** An escaped NUL in JSON text: `\u0000` whose backslash is not itself escaped. */
const JSON_NUL = /(?:^|[^\\])(?:\\\\)*\\u0000/;

/** A value PostgreSQL cannot store; the message names where in it and what (see unstorableText). */
export class UnstorableValueError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnstorableValueError';
  }
}

function fault(s: string): string | null {
  if (s.includes(NUL)) return 'a NUL character (\\u0000)';
  if (LONE_SURROGATE.test(s)) return 'an unpaired UTF-16 surrogate';
  return null;
}

function hasFault(s: string): boolean {
  return s.includes(NUL) || LONE_SURROGATE.test(s);
}

/** Whether `text` holds a NUL character (a text column refuses it). */
export function hasNul(text: string | null | undefined): boolean {
  return typeof text === 'string' && text.includes(NUL);
}

/** Whether `json` (JSON.stringify output) encodes a NUL character, which jsonb refuses. */
export function jsonHasNul(json: string): boolean {
  return json.includes('\\u0000') && JSON_NUL.test(json);
}

/**
 * The JSON a task outcome (`value`, its result or error) is stored as, checked with its statusMessage before
 * any write: a NUL character in either throws UnstorableValueError naming where, since no retry could land
 * that write.
 */
export function storableOutcomeJson(
  value: unknown,
  root: 'result' | 'error',
  statusMessage: string | null,
): string {
  const payload = JSON.stringify(value);
  if (hasNul(statusMessage))
    throw new UnstorableValueError('statusMessage contains a NUL character (\\u0000)');
  if (jsonHasNul(payload)) {
    throw new UnstorableValueError(unstorableText(value, root) ?? 'it contains a NUL character');
  }
  return payload;
}

/**
 * Where in `value` (parsed JSON: strings, arrays, plain objects) there is text PostgreSQL cannot store,
 * and what, as "params.arguments.name contains a NUL character (\u0000)"; null when there is none. Walked
 * without recursion, so no nesting depth can overflow the stack; paths are only built once a fault is
 * known to be there.
 */
export function unstorableText(value: unknown, root: string): string | null {
  return anyFault(value) ? locate(value, root) : null;
}

function anyFault(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (hasFault(v)) return true;
    } else if (Array.isArray(v)) {
      for (const x of v) stack.push(x);
    } else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (hasFault(k)) return true;
        stack.push(x);
      }
    }
  }
  return false;
}

function locate(value: unknown, root: string): string | null {
  const join = (path: string, key: string): string => (path === '' ? key : `${path}.${key}`);
  const stack: Array<[unknown, string]> = [[value, root]];
  while (stack.length > 0) {
    const [v, path] = stack.pop()!;
    if (typeof v === 'string') {
      const f = fault(v);
      if (f) return `${path || 'the value'} contains ${f}`;
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${path}[${i}]`]);
    } else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v).reverse()) {
        const f = fault(k);
        if (f) return `a key of ${path || 'the value'} contains ${f}`;
        stack.push([x, join(path, k)]);
      }
    }
  }
  return null;
}
