/**
 * Every fixed advisory-lock key the service takes, in one place, so no two uses can collide. Arbitrary but
 * fixed: every instance (and the CLI) agrees on them, and nothing else in the database uses them. They lie
 * above the int4 range, so they never meet a key made by `hashtext` (SESSION_CREATION_LOCK_PREFIX).
 */
export enum AdvisoryLockKey {
  /** Session-scoped, while the migrations run (MigrationsRunner, `migrations run`). */
  Migrations = 7_140_512_001,
  /** Transaction-scoped, in the round trip that commits a creation and checks its limits. */
  TaskCreation = 7_140_512_101,
  /** Transaction-scoped (try), per janitor batch: one instance sweeps at a time. */
  Janitor = 7_140_512_102,
  /**
   * Transaction-scoped, around every claim of queued work and every pause of a tool's queue: claims on all
   * instances take turns, so each one counts what is running (fair shares, tool limits) after the claim
   * before it committed.
   */
  TaskClaim = 7_140_512_103,
}

/**
 * Session creation serializes per principal on `pg_advisory_xact_lock(hashtext(prefix || principal id))`:
 * one key per principal, in the int4 range (see AdvisoryLockKey).
 */
export const SESSION_CREATION_LOCK_PREFIX = 'mcp_session:';
