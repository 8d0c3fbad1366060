import { randomFillSync, randomInt } from 'node:crypto';
import { TaskError, TaskErrorCode } from './tasks.errors.js';

const ID_BYTES = 18;
/**
 * Random bytes for the next 256 ids, filled from the CSPRNG in one call: a call into the crypto binding per
 * id costs as much as the rest of minting it. Each byte is used for one id only.
 */
const pool = Buffer.alloc(ID_BYTES * 256);
let poolOffset = pool.length;

/** Index of `-` in the base64url alphabet: the top six bits of an id's first byte pick its first character. */
const DASH = 62;

/**
 * 18 random bytes as 24 url-safe characters: unguessable, so an id can act as a bearer handle. The first
 * character is never `-`, so an id pasted after a command (the admin CLI, psql, grep) is never read as an
 * option; it is drawn uniformly from the other 63, which leaves 143.98 of the 144 bits.
 */
export function newTaskId(): string {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const first = pool[poolOffset];
  if (first >> 2 === DASH) {
    // One id in 64: a fresh draw among the 63 other first characters; the low two bits stay as drawn.
    const pick = randomInt(DASH + 1);
    pool[poolOffset] = ((pick === DASH ? DASH + 1 : pick) << 2) | (first & 0b11);
  }
  const id = pool.toString('base64url', poolOffset, poolOffset + ID_BYTES);
  poolOffset += ID_BYTES;
  return id;
}

const TASK_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** Shape check only; whether the task exists (for this owner) is the store's answer. */
export function isWellFormedTaskId(id: unknown): id is string {
  return typeof id === 'string' && TASK_ID.test(id);
}

export interface ListPosition {
  createdAt: Date;
  id: string;
}

/** Opaque tasks/list cursor: the (created_at, id) of the last task of the previous page. */
export function encodeCursor(pos: ListPosition): string {
  return Buffer.from(JSON.stringify([pos.createdAt.toISOString(), pos.id]), 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): ListPosition {
  const invalid = (): TaskError => new TaskError(TaskErrorCode.INVALID_CURSOR, 'Invalid cursor');
  if (typeof cursor !== 'string' || cursor.length === 0 || cursor.length > 512) throw invalid();
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw invalid();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (!Array.isArray(parsed) || parsed.length !== 2) throw invalid();
  const [iso, id] = parsed as unknown[];
  if (typeof iso !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(iso)) throw invalid();
  const createdAt = new Date(iso);
  if (Number.isNaN(createdAt.getTime()) || !isWellFormedTaskId(id)) throw invalid();
  return { createdAt, id };
}
