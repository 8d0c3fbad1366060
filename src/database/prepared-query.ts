import type pg from 'pg';
import type { DataSource } from 'typeorm';

/** A statement the hot paths run often enough that PostgreSQL should parse and plan it once per connection. */
export interface PreparedStatement {
  /** Unique per statement text: pg caches the prepared statement on each pooled connection under this name. */
  readonly name: string;
  readonly text: string;
}

/**
 * Runs a named prepared statement on TypeORM's own pg pool (same connections, same pool limits). For the few
 * per-request reads where TypeORM's query building and entity hydration cost more than the query itself;
 * only repositories call it, with constant SQL, so it never takes user text as SQL.
 */
export async function runPrepared<R extends pg.QueryResultRow>(
  dataSource: DataSource,
  statement: PreparedStatement,
  values: unknown[],
): Promise<R[]> {
  const pool = (dataSource.driver as unknown as { master: pg.Pool }).master;
  const result = await pool.query<R>({ name: statement.name, text: statement.text, values });
  return result.rows;
}
