/** A request's progress token (`_meta.progressToken`): a string or a number, as JSON-RPC ids are. */
export type ProgressToken = string | number;

/** The progress token a request's `_meta` carries, if it is a valid one. */
export function progressTokenOf(meta: Readonly<Record<string, unknown>>): ProgressToken | undefined {
  const token = meta.progressToken;
  return typeof token === 'string' || typeof token === 'number' ? token : undefined;
}
