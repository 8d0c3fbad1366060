import { unstorableText } from '../common/storable-text.js';
import type { QuotaName } from '../quotas/quota.errors.js';

/** The setting that caps a checkpoint (QuotasConfig), named in every size refusal. */
export const CHECKPOINT_SETTING = 'QUOTA_TASK_CHECKPOINT_BYTES';

/**
 * A checkpoint the server refused: not JSON, over QUOTA_TASK_CHECKPOINT_BYTES, or from a run that no longer
 * holds its task. The task is left as it was. A retry policy's default `retryOn` does not retry it: the same
 * state would be refused again.
 */
export class CheckpointError extends Error {
  /**
   * @param quota the quota the checkpoint broke (its size over QUOTA_TASK_CHECKPOINT_BYTES), so whoever
   *   saves checkpoints counts it in mcp_quota_rejections_total like every other quota refusal; absent when
   *   the state is not JSON or the run lost its task (not a quota).
   */
  constructor(
    message: string,
    readonly quota?: QuotaName,
  ) {
    super(message);
    this.name = 'CheckpointError';
  }
}

/** Why `v` (found at `path`) is not JSON, or null when it is a JSON leaf or container to walk into. */
function notJson(v: unknown, path: string, inArray: boolean): string | null {
  switch (typeof v) {
    case 'function':
      return `${path} is a function`;
    case 'symbol':
      return `${path} is a symbol`;
    case 'bigint':
      return `${path} is a BigInt (JSON has no BigInt: save it as a string)`;
    case 'undefined':
      // An undefined property is left out of JSON (as JSON.stringify does); anywhere else it has no JSON form.
      return inArray || path === 'checkpoint' ? `${path} is undefined` : null;
    case 'number':
      return Number.isFinite(v) ? null : `${path} is ${String(v)} (JSON numbers are finite)`;
    case 'boolean':
    case 'string':
    case 'object':
      return null;
  }
}

/**
 * The JSON text a checkpoint is stored as. Throws CheckpointError naming where the state is not JSON
 * (a function, a symbol, a BigInt, a non-finite number, a Map or Set, a cycle), where it holds text
 * PostgreSQL cannot store, or its size against `maxBytes` (QUOTA_TASK_CHECKPOINT_BYTES). Objects with a
 * `toJSON` (a Date) are taken as JSON.stringify takes them. Walked without recursion, so no nesting depth
 * overflows the stack.
 */
export function serialiseCheckpoint(state: unknown, maxBytes: number): string {
  const onPath = new Set<object>();
  // Depth-first with an explicit exit marker, so `onPath` holds exactly the containers above the current one
  // (a value seen twice in sibling branches is fine; one inside itself is a cycle).
  const stack: Array<{ v: unknown; path: string; inArray: boolean } | { exit: object }> = [
    { v: state, path: 'checkpoint', inArray: false },
  ];
  while (stack.length > 0) {
    const top = stack.pop()!;
    if ('exit' in top) {
      onPath.delete(top.exit);
      continue;
    }
    const { v, path, inArray } = top;
    const bad = notJson(v, path, inArray);
    if (bad) throw new CheckpointError(`The checkpoint is not JSON: ${bad}`);
    if (v === null || typeof v !== 'object') continue;
    if (typeof (v as { toJSON?: unknown }).toJSON === 'function') continue;
    if (onPath.has(v))
      throw new CheckpointError(`The checkpoint is not JSON: ${path} refers back to itself (a cycle)`);
    if (v instanceof Map || v instanceof Set) {
      throw new CheckpointError(
        `The checkpoint is not JSON: ${path} is a ${v instanceof Map ? 'Map' : 'Set'} (save an object or an array)`,
      );
    }
    onPath.add(v);
    stack.push({ exit: v });
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ v: v[i], path: `${path}[${i}]`, inArray: true });
    } else {
      for (const [k, x] of Object.entries(v).reverse())
        stack.push({ v: x, path: `${path}.${k}`, inArray: false });
    }
  }
  const json = JSON.stringify(state);
  const unstorable = unstorableText(JSON.parse(json), 'checkpoint');
  if (unstorable) throw new CheckpointError(`The checkpoint cannot be stored: ${unstorable}`);
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > maxBytes) {
    throw new CheckpointError(
      `The checkpoint is ${bytes} bytes of JSON, over ${CHECKPOINT_SETTING} = ${maxBytes} bytes`,
      'task_checkpoint_bytes',
    );
  }
  return json;
}
