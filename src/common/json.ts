/** A JSON object as parsed: string keys, any values (never an array, never null). */
export type JsonObject = { [key: string]: unknown };

/** Whether a parsed JSON value is an object (not an array, not null). */
export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
