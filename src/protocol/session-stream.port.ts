import type { SqlTx } from '../database/sql-transaction.js';

/**
 * What the tasks protocol needs of the legacy (2025-11-25) transport: the session's own GET stream, to log
 * notifications on, to wake its holder, and to ask the client server-to-client requests. A port of the
 * protocol layer, used by `tasks/protocol/` and provided by `gateway/` (the stream hub and client requests behind it), so that `tasks/` never imports
 * the transport.
 */
export abstract class SessionStream {
  /** Logs a message on the session's GET stream and wakes its holder wherever it is. */
  abstract publish(sessionId: string, message: Record<string, unknown>): Promise<void>;
  /** Logs a message on the session's GET stream inside the caller's transaction (an outbox). */
  abstract publishInTransaction(tx: SqlTx, sessionId: string, message: Record<string, unknown>): void;
  /** Wakes this instance's holder of the session's GET stream, if any. */
  abstract wakeHolder(sessionId: string): void;
  /** Sends a server-to-client request on the session's GET stream and waits for the client's answer. */
  abstract request(
    sessionId: string,
    method: string,
    params: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<Record<string, unknown>>;
}
