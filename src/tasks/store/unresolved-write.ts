import { CommitOutcomeUnknownError } from '../../database/sql-transaction.js';

/**
 * A task write whose COMMIT answer was lost and whose fate could not be learned (the database stayed out
 * of reach, or the transaction was still open there). It keeps what that write would answer had it
 * landed and the id of its transaction, so a caller that retries (the task runner) asks
 * TaskTransactions.landed first instead of writing again and mistaking its own landed write for someone
 * else's. Still a CommitOutcomeUnknownError: at the edge it is a database outage (503, Retry-After).
 */
export class UnresolvedWriteError<T> extends CommitOutcomeUnknownError {
  constructor(
    driverError: unknown,
    /** The writing transaction's id (pg_current_xact_id) as text. */
    readonly xact: string,
    /** The write's answer, true if and only if the transaction committed. */
    readonly ifLanded: T,
  ) {
    super(driverError);
    this.name = 'UnresolvedWriteError';
  }
}
