import type pg from 'pg';
import type { DataSource } from 'typeorm';
import type { StatementModeSetting } from './database.config.js';
import type { PreparedStatement } from './prepared-query.js';

/**
 * How the hot statements reach PostgreSQL. `named`: a protocol-level prepared statement, parsed and planned
 * once per server connection. `unnamed`: the unnamed statement of the extended protocol, parsed on every
 * call, which is all a transaction-mode pooler that does not track prepared statements can carry (PgBouncer
 * before 1.21, or 1.21+ with `max_prepared_statements = 0`): there a named statement prepared in one
 * transaction is looked for on whatever server connection the next transaction gets, and is not there.
 */
export type StatementMode = 'named' | 'unnamed';
// `auto` (StatementModeSetting) is named until the pool shows it cannot keep them: the boot probe, or the
// first mismatch at run time.

interface ModeState {
  mode: StatementMode;
  forced: boolean;
  log: (message: string) => void;
}

const states = new WeakMap<pg.Pool, ModeState>();
/** Longest the probe holds a transaction open on its second connection. */
const PROBE_HOLD_MS = 3000;

/** TypeORM's own pg pool (the same connections and limits as everything else). */
export function poolOf(dataSource: DataSource): pg.Pool {
  return (dataSource.driver as unknown as { master: pg.Pool }).master;
}

function stateOf(pool: pg.Pool): ModeState {
  let s = states.get(pool);
  if (!s) {
    s = { mode: 'named', forced: false, log: () => undefined };
    states.set(pool, s);
  }
  return s;
}

export function statementMode(pool: pg.Pool): StatementMode {
  return stateOf(pool).mode;
}

/** Sets the mode (a forced one never changes again) and where mode changes are logged. */
export function configureStatementMode(
  pool: pg.Pool,
  setting: StatementModeSetting,
  log: (message: string) => void,
): void {
  const s = stateOf(pool);
  s.log = log;
  s.forced = setting !== 'auto';
  s.mode = setting === 'unnamed' ? 'unnamed' : 'named';
}

/** The query pg runs for `statement` in the pool's current mode. */
export function queryFor(pool: pg.Pool, statement: PreparedStatement, values: unknown[]): pg.QueryConfig {
  return stateOf(pool).mode === 'named'
    ? { name: statement.name, text: statement.text, values }
    : { text: statement.text, values };
}

/** SQLSTATE 26000 (no such prepared statement) and 42P05 (already exists): a pooler mixing server connections. */
export function isStatementMismatch(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '26000' || code === '42P05';
}

/**
 * After a statement mismatch: in `auto` mode switch the pool to unnamed statements for good and say so.
 * True when the failed work should be retried (the pool now runs unnamed statements, so a retry cannot hit
 * the same mismatch); false when the mode was forced to `named`, where the error stands.
 */
export function fallBackToUnnamed(pool: pg.Pool, err: unknown): boolean {
  if (!isStatementMismatch(err)) return false;
  const s = stateOf(pool);
  if (s.mode === 'unnamed') return true;
  if (s.forced) return false;
  s.mode = 'unnamed';
  s.log(
    `prepared statements: unnamed from now on (the pool lost a named statement: ${(err as Error).message}); ` +
      'a transaction-mode pooler that does not keep prepared statements is in the way',
  );
  return true;
}

export interface ProbeOutcome {
  mode: StatementMode;
  reason: string;
}

/**
 * Whether named statements survive from one transaction to the next on this pool. One client prepares a
 * statement reporting its backend; a second client then holds a transaction open (behind a transaction
 * pooler it most likely gets the very server connection the first just released), and the first runs its
 * statement again. Direct or session pooling: same backend, it works. A pooler that tracks prepared
 * statements (PgBouncer ≥ 1.21 with max_prepared_statements): another backend, it works. Any other
 * transaction pooler: another backend without the statement, 26000. Inconclusive outcomes leave `named`,
 * and the run-time fallback (fallBackToUnnamed) covers them.
 */
export async function probeStatementMode(pool: pg.Pool): Promise<ProbeOutcome> {
  // The same name and text on every instance: a server connection that has it from another client runs the
  // same statement, and a pooler mixing them shows as 42P05 (already exists) just as well as 26000.
  const probe: pg.QueryConfig = { name: 'mcp_probe_backend_pid', text: 'SELECT pg_backend_pid() AS pid' };
  // Two connections at once: a pool of one would wait for itself.
  if ((pool.options.max ?? 10) < 2) return { mode: 'named', reason: 'not probed with a pool of one' };
  const pidOf = async (c: pg.PoolClient, q: pg.QueryConfig | string): Promise<number> =>
    (await c.query<{ pid: number }>(q)).rows[0].pid;
  const first = await pool.connect();
  let holder: pg.PoolClient | undefined;
  let holding = false;
  const letGo = async (): Promise<void> => {
    if (!holding || !holder) return;
    holding = false;
    await holder.query('COMMIT').catch(() => undefined);
  };
  try {
    const before = await pidOf(first, probe);
    holder = await pool.connect();
    await holder.query('BEGIN');
    holding = true;
    const held = await pidOf(holder, 'SELECT pg_backend_pid() AS pid');
    const again = pidOf(first, probe);
    // A pooler with a single server connection would make the second run wait for the holder: let go then.
    const timer = setTimeout(() => void letGo(), PROBE_HOLD_MS);
    let after: number;
    try {
      after = await again;
    } finally {
      clearTimeout(timer);
    }
    if (after !== before)
      return { mode: 'named', reason: 'a transaction pooler that keeps prepared statements' };
    return { mode: 'named', reason: held === before ? 'inconclusive probe' : 'one session per connection' };
  } catch (err) {
    if (isStatementMismatch(err)) {
      return { mode: 'unnamed', reason: 'a transaction pooler that does not keep prepared statements' };
    }
    throw err;
  } finally {
    await letGo();
    holder?.release();
    first.release();
  }
}

/** Boot: applies the setting, probes in `auto` mode, and logs the mode either way. */
export async function initStatementMode(
  pool: pg.Pool,
  setting: StatementModeSetting,
  log: (message: string) => void,
): Promise<StatementMode> {
  configureStatementMode(pool, setting, log);
  if (setting !== 'auto') {
    log(`prepared statements: ${setting} (DB_PREPARED_STATEMENTS=${setting})`);
    return setting;
  }
  const outcome = await probeStatementMode(pool);
  // A mismatch seen by a request while the probe ran may have switched already; never switch back.
  if (outcome.mode === 'unnamed') stateOf(pool).mode = 'unnamed';
  log(`prepared statements: ${statementMode(pool)} (auto: ${outcome.reason})`);
  return statementMode(pool);
}
