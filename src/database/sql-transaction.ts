import pg from 'pg';
import type { DataSource } from 'typeorm';
import type { PreparedStatement } from './prepared-query.js';
import { fallBackToUnnamed, poolOf, queryFor } from './statement-mode.js';
import { errorMessage } from '../common/error-message.js';
import { sqlLiteral } from './sql-literal.js';

/** What a statement runner must offer: a TypeORM EntityManager and an SqlTx both do. */
export interface SqlRunner {
  query(text: string, values?: unknown[]): Promise<unknown>;
}

/**
 * One open transaction on one pooled connection. Statements run in order on that connection; NOTIFYs are
 * queued and sent with the COMMIT (PostgreSQL delivers a NOTIFY only at commit anyway, so sending it just
 * before COMMIT in the same round trip changes nothing a listener can see, and a rollback drops them).
 */
export interface SqlTx extends SqlRunner {
  /** The rows the statement returned (for UPDATE/DELETE … RETURNING too). */
  query<R = Record<string, unknown>>(text: string, values?: unknown[]): Promise<R[]>;
  /**
   * A statement that may be the transaction's first: then it is sent with BEGIN in one round trip (simple
   * protocol, its values inlined as literals; PostgreSQL plans it each time), else as `prepared`.
   */
  first<R extends pg.QueryResultRow = Record<string, unknown>>(
    statement: PreparedStatement,
    values: unknown[],
  ): Promise<R[]>;
  /** A prepared statement (named, so parsed and planned once per connection, unless the pool cannot keep them). */
  prepared<R extends pg.QueryResultRow = Record<string, unknown>>(
    statement: PreparedStatement,
    values: unknown[],
  ): Promise<R[]>;
  /** NOTIFY `channel` with `payload` when (and only if) the transaction commits. */
  notifyOnCommit(channel: string, payload: string): void;
  /**
   * A statement run last, in the COMMIT's round trip, for writes whose answer nobody waits for (an outbox
   * row). `$n` placeholders take `values`, inlined as literals as in `first`. If it fails, so does the commit.
   */
  atCommit(sql: string, values?: unknown[]): void;
  /**
   * Like atCommit, but the statement's text is built when the COMMIT is sent (in its place among the
   * atCommit statements): for rows collected while the transaction runs and written in one statement (the
   * audit trail's). An empty text sends nothing.
   */
  atCommitBuilt(build: () => string): void;
  /**
   * `fn` runs once the COMMIT was answered (never after a rollback or an unknown outcome): for side effects
   * outside the database that must only report what landed (the audit trail's OpenTelemetry log records).
   * It must not throw; it is not awaited.
   */
  afterCommit(fn: () => void): void;
  /** A value as a quoted SQL literal (pg's own escaping), for atCommit statements. */
  literal(value: string): string;
}

export interface TransactionOptions {
  /** SET LOCAL lock_timeout for the transaction, in milliseconds (0: none). */
  lockTimeoutMs: number;
  /**
   * A transaction-scoped advisory lock taken right after BEGIN, in the same round trip. The statements the
   * work runs afterwards each take a fresh snapshot (READ COMMITTED), so they see everything committed by
   * the previous holder of the lock.
   */
  advisoryLock?: number;
  /** SET LOCAL name = 'value' for each entry (custom settings such as a trigger's mode; names are checked). */
  localSettings?: Record<string, string>;
}

/**
 * The COMMIT went out but no answer came back (the connection dropped, the server went away): the
 * transaction may have committed or not, and only a fresh look at the database can tell. Callers whose
 * writes can recognise their own landed work (a row with an id they minted, an outcome at their
 * generation) find out and answer with the truth; `driverError` keeps the cause for the error mapping.
 */
export class CommitOutcomeUnknownError extends Error {
  constructor(readonly driverError: unknown) {
    super(`commit outcome unknown: ${errorMessage(driverError)}`);
    this.name = 'CommitOutcomeUnknownError';
  }
}

/**
 * Whether a failed COMMIT round trip was answered by the server with an error about the statements
 * themselves, so the transaction certainly rolled back. A lost connection (no answer at all), a
 * connection-class SQLSTATE or an operator's termination can come after the commit took effect.
 */
function refusedByServer(err: unknown): boolean {
  if (!(err instanceof pg.DatabaseError) || typeof err.code !== 'string') return false;
  // 08P01 (protocol violation) rejects the message before any of it runs.
  if (err.code === '08P01') return true;
  return !err.code.startsWith('08') && !err.code.startsWith('57P');
}

/** A statement's text split at its `$n` placeholders: parts[k] precedes slots[k] (a 0-based value index). */
interface Placeholders {
  parts: string[];
  slots: number[];
}

/**
 * Statement texts are constants, a few dozen of them: each is split once, not scanned with a regular
 * expression on every inlining (a regular expression per statement showed in lifecycle profiles). Bounded all the same, so a
 * caller that built texts dynamically could not grow it without end.
 */
const placeholderCache = new Map<string, Placeholders>();
const PLACEHOLDER_CACHE_MAX = 256;

function placeholdersOf(text: string): Placeholders {
  const known = placeholderCache.get(text);
  if (known) return known;
  const parts: string[] = [];
  const slots: number[] = [];
  const re = /\$(\d+)/g;
  let last = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    parts.push(text.slice(last, m.index));
    slots.push(Number(m[1]) - 1);
    last = m.index + m[0].length;
  }
  parts.push(text.slice(last));
  const split = { parts, slots };
  if (placeholderCache.size < PLACEHOLDER_CACHE_MAX) placeholderCache.set(text, split);
  return split;
}

/** Well under PostgreSQL's 1,664 target-list entries. */
const NOTIFY_PER_STATEMENT = 500;

function integer(n: number, what: string): string {
  if (!Number.isSafeInteger(n)) throw new Error(`${what} must be an integer, got ${n}`);
  return String(n);
}

class PooledTx implements SqlTx {
  readonly pending: Array<[string, string]> = [];
  readonly statements: Array<string | (() => string)> = [];
  readonly committed: Array<() => void> = [];
  /** BEGIN and what goes with it, until it is sent (with the first statement, or on its own). */
  private opening: string | null;

  constructor(
    private readonly pool: pg.Pool,
    private readonly client: pg.PoolClient,
    opening: string,
  ) {
    this.opening = opening;
  }

  private async open(): Promise<void> {
    if (this.opening === null) return;
    const text = this.opening;
    this.opening = null;
    await this.client.query(text);
  }

  async query<R = Record<string, unknown>>(text: string, values?: unknown[]): Promise<R[]> {
    await this.open();
    const result = await this.client.query(text, values);
    return result.rows as R[];
  }

  async prepared<R extends pg.QueryResultRow>(statement: PreparedStatement, values: unknown[]): Promise<R[]> {
    await this.open();
    const result = await this.client.query<R>(queryFor(this.pool, statement, values));
    return result.rows;
  }

  async first<R extends pg.QueryResultRow>(statement: PreparedStatement, values: unknown[]): Promise<R[]> {
    if (this.opening === null) return this.prepared<R>(statement, values);
    const text = `${this.opening}; ${this.inline(statement.text, values)}`;
    this.opening = null;
    // Several statements in one simple query: pg answers with one result per statement.
    const results = (await this.client.query(text)) as unknown as pg.QueryResult<R> | pg.QueryResult<R>[];
    return Array.isArray(results) ? results[results.length - 1].rows : results.rows;
  }

  /** `$n` placeholders replaced by literals (constant SQL only: the values never become SQL text). */
  private inline(text: string, values: unknown[]): string {
    const { parts, slots } = placeholdersOf(text);
    let out = parts[0];
    for (let k = 0; k < slots.length; k++) {
      const i = slots[k];
      if (i < 0 || i >= values.length) throw new Error(`no value for $${i + 1}`);
      out += this.valueLiteral(values[i]) + parts[k + 1];
    }
    return out;
  }

  private valueLiteral(v: unknown): string {
    if (v === null || v === undefined) return 'NULL';
    if (typeof v === 'boolean') return v ? 'TRUE' : 'FALSE';
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) throw new Error(`cannot inline ${v}`);
      return `(${String(v)})`;
    }
    if (typeof v === 'string') return this.literal(v);
    throw new Error(`cannot inline a value of type ${typeof v}`);
  }

  notifyOnCommit(channel: string, payload: string): void {
    this.pending.push([channel, payload]);
  }

  atCommit(sql: string, values: unknown[] = []): void {
    this.statements.push(values.length === 0 ? sql : this.inline(sql, values));
  }

  atCommitBuilt(build: () => string): void {
    this.statements.push(build);
  }

  afterCommit(fn: () => void): void {
    this.committed.push(fn);
  }

  literal(value: string): string {
    return sqlLiteral(value);
  }

  /** The closing round trip (simple protocol): the queued statements, the NOTIFYs, then COMMIT. */
  commitText(): string {
    const parts = this.opening === null ? [] : [this.opening];
    for (const statement of this.statements) {
      const text = typeof statement === 'string' ? statement : statement();
      if (text !== '') parts.push(text);
    }
    // All the NOTIFYs in one SELECT (a few statements at most): a group commit carries one per task, and each
    // statement of its own was parsed, planned and answered with a row the driver decoded. The target list
    // is evaluated in order, so they are queued (and delivered) in the order they were asked for.
    for (let i = 0; i < this.pending.length; i += NOTIFY_PER_STATEMENT) {
      const calls = this.pending
        .slice(i, i + NOTIFY_PER_STATEMENT)
        .map(([c, p]) => `pg_notify(${this.literal(c)}, ${this.literal(p)})`);
      parts.push(`SELECT ${calls.join(', ')}`);
    }
    parts.push('COMMIT');
    return parts.join('; ');
  }
}

/**
 * Runs `work` in a transaction straight on TypeORM's pg pool (same connections, same limits), without
 * TypeORM's query runner: the hot write paths spend most of their time in round trips, so BEGIN, the lock
 * timeout and an optional advisory lock go in one, and the NOTIFYs ride with COMMIT. On any error the
 * transaction is rolled back; a connection that cannot even roll back is destroyed rather than reused. A
 * COMMIT whose answer is lost rejects with CommitOutcomeUnknownError: it may have landed.
 * A prepared statement the pool lost (a transaction pooler, see statement-mode.ts) aborts the transaction
 * before anything of it commits: the pool switches to unnamed statements and `work` runs once more.
 */
export async function inTransaction<T>(
  dataSource: DataSource,
  options: TransactionOptions,
  work: (tx: SqlTx) => Promise<T>,
): Promise<T> {
  const pool = poolOf(dataSource);
  const opening = openingOf(options);
  try {
    return await attempt(pool, opening, work);
  } catch (err) {
    if (!fallBackToUnnamed(pool, err)) throw err;
    return attempt(pool, opening, work);
  }
}

/** BEGIN and the settings that go with it in the same round trip. */
function openingOf(options: TransactionOptions): string {
  let opening = 'BEGIN';
  if (options.lockTimeoutMs > 0) {
    opening += `; SET LOCAL lock_timeout = '${integer(options.lockTimeoutMs, 'lock timeout')}ms'`;
  }
  for (const [name, value] of Object.entries(options.localSettings ?? {})) {
    if (!/^[a-z_]+\.[a-z_]+$/.test(name) || !/^[a-z0-9_]*$/.test(value)) {
      throw new Error(`invalid setting ${name} = ${value}`);
    }
    opening += `; SET LOCAL ${name} = '${value}'`;
  }
  if (options.advisoryLock !== undefined) {
    opening += `; SELECT pg_advisory_xact_lock(${integer(options.advisoryLock, 'advisory lock key')})`;
  }
  return opening;
}

async function attempt<T>(pool: pg.Pool, opening: string, work: (tx: SqlTx) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // A checked-out pg client has no 'error' listener of the pool's: a connection dropped mid-transaction
  // would otherwise be an unhandled 'error' event. The statement in flight rejects on its own.
  let lost: Error | undefined;
  const onError = (err: Error): void => {
    lost = err;
  };
  client.on('error', onError);
  const release = (err?: Error): void => {
    client.removeListener('error', onError);
    client.release(err);
  };
  const tx = new PooledTx(pool, client, opening);
  let committing = false;
  try {
    const result = await work(tx);
    committing = true;
    await client.query(tx.commitText());
    release(lost);
    for (const fn of tx.committed) fn();
    return result;
  } catch (err) {
    // ROLLBACK outside a transaction (BEGIN itself failed) only warns; a failure here means the
    // connection is unusable, so it is destroyed instead of going back to the pool.
    let broken = lost;
    if (!broken) {
      try {
        await client.query('ROLLBACK');
      } catch (rollbackErr) {
        broken = rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
      }
    }
    release(broken);
    if (committing && !refusedByServer(err)) throw new CommitOutcomeUnknownError(err);
    throw err;
  }
}
