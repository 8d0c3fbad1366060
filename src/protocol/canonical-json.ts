import { createHash } from 'node:crypto';

/**
 * JSON with object keys sorted at every level, so equal values always digest the same. It runs on the hot
 * path (the audit trail hashes every task's arguments and result), so it builds one string with plain loops
 * instead of the entry arrays, filters and maps a one-liner would allocate at every level; `sort()` with no
 * comparator orders keys by UTF-16 code units, as `<` does.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value ?? null);
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i === 0 ? '' : ',') + canonicalJson(value[i]);
    return out + ']';
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  let out = '{';
  let first = true;
  for (const key of keys) {
    const v = record[key];
    if (v === undefined) continue;
    out += (first ? '' : ',') + JSON.stringify(key) + ':' + canonicalJson(v);
    first = false;
  }
  return out + '}';
}

export function digest(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('base64url');
}
