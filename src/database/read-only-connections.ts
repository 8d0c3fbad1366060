import type pg from 'pg';

/** read_only_sql_transaction: a write reached a hot standby (or a session with default_transaction_read_only). */
export const READ_ONLY_SQLSTATE = '25006';

/** pg-pool's clients, and its set of clients to close instead of reuse at their release (maxLifetimeSeconds). */
interface RetiringPool {
  _clients?: pg.PoolClient[];
  _expired?: WeakSet<pg.PoolClient>;
}

interface ErrorNotices {
  on(event: 'errorMessage', listener: (msg: { code?: unknown }) => void): unknown;
}

const watched = new WeakSet<pg.Pool>();

/**
 * Closes every connection the pool has now at its next release instead of returning it to the pool, so the
 * pool reconnects through the address. Called once some connection found the server read-only (a standby an
 * address still leads to after a failover, DNS caching): a connection stays on its server for life, and the
 * others were most likely opened through the same address in the same period; kept, they would refuse every
 * write after the address has moved back to the primary. A connection idle now is used once more at most
 * (a write on it is refused again, a retryable 503), then closed.
 */
export function retireConnections(pool: pg.Pool): void {
  const p = pool as unknown as RetiringPool;
  for (const client of p._clients ?? []) p._expired?.add(client);
}

/**
 * Watches every connection of the pool for a read-only refusal (SQLSTATE 25006) and then retires the pool's
 * connections (retireConnections). Covers every path to the pool (TypeORM's query runners and repositories,
 * our own transactions), since it listens on the connections themselves; connections made before the call
 * are watched too.
 */
export function retireConnectionsOnReadOnly(pool: pg.Pool): void {
  if (watched.has(pool)) return;
  watched.add(pool);
  const watch = (client: pg.PoolClient): void => {
    const connection = (client as unknown as { connection?: ErrorNotices }).connection;
    connection?.on('errorMessage', (msg) => {
      if (msg.code === READ_ONLY_SQLSTATE) retireConnections(pool);
    });
  };
  for (const client of (pool as unknown as RetiringPool)._clients ?? []) watch(client);
  pool.on('connect', watch);
}
