import type { DataSource, Migration } from 'typeorm';

/** Arbitrary but fixed: every instance of this service agrees on it, nothing else in the database uses it. */
export const MIGRATION_LOCK_KEY = 7_140_512_001;

/**
 * Runs pending migrations while holding a session advisory lock, so instances that boot together
 * queue up: the first applies the migrations, the others find nothing pending.
 */
export async function runMigrationsLocked(dataSource: DataSource): Promise<Migration[]> {
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      return await dataSource.runMigrations({ transaction: 'all' });
    } finally {
      await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    await runner.release();
  }
}

/** True when every migration the code knows has been applied. */
export async function migrationsApplied(dataSource: DataSource): Promise<boolean> {
  return !(await dataSource.showMigrations());
}
