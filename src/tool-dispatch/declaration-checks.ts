/*
 * The checks the tool explorer's declaration readers share (tool-durability.ts, tool-limits.ts): each mistake
 * goes onto `problems` with the declaration's path, and the boot stops with all of them.
 */

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function isIntIn(v: unknown, min: number, max: number): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;
}

/** Every key of `v` that is not one of `known`, as a problem at `where`. */
export function unknownKeys(
  v: Record<string, unknown>,
  known: string[],
  where: string,
  problems: string[],
): void {
  for (const k of Object.keys(v)) {
    if (!known.includes(k)) problems.push(`${where}.${k} is not an option (known: ${known.join(', ')})`);
  }
}
