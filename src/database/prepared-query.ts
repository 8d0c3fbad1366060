import type pg from 'pg';
import type { DataSource } from 'typeorm';
import { fallBackToUnnamed, poolOf, queryFor } from './statement-mode.js';

/** A statement the hot paths run often enough that PostgreSQL should parse and plan it once per connection. */
export interface PreparedStatement {
  /** Unique per statement text: pg caches the prepared statement on each pooled connection under this name. */
  readonly name: string;
  readonly text: string;
}

/**
 * Runs a prepared statement on TypeORM's own pg pool (same connections, same pool limits). For the few
 * per-request reads where TypeORM's query building and entity hydration cost more than the query itself;
 * only repositories call it, with constant SQL, so it never takes user text as SQL. Named or unnamed as the
 * pool's statement mode says (statement-mode.ts); a statement the pool lost is not run at all (PostgreSQL
 * refuses it at Bind or Parse), so it is retried once, unnamed.
 */
export async function runPrepared<R extends pg.QueryResultRow>(
  dataSource: DataSource,
  statement: PreparedStatement,
  values: unknown[],
): Promise<R[]> {
  const pool = poolOf(dataSource);
  try {
    return (await pool.query<R>(queryFor(pool, statement, values))).rows;
  } catch (err) {
    if (!fallBackToUnnamed(pool, err)) throw err;
    return (await pool.query<R>(queryFor(pool, statement, values))).rows;
  }
}
