import type { DataSource, Migration } from 'typeorm';
import { AdvisoryLockKey } from './advisory-locks.js';

/**
 * Runs pending migrations while holding a session advisory lock, so instances that boot together
 * queue up: the first applies the migrations, the others find nothing pending.
 */
export async function runMigrationsLocked(dataSource: DataSource): Promise<Migration[]> {
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    await runner.query('SELECT pg_advisory_lock($1)', [AdvisoryLockKey.Migrations]);
    try {
      return await dataSource.runMigrations({ transaction: 'all' });
    } finally {
      await runner.query('SELECT pg_advisory_unlock($1)', [AdvisoryLockKey.Migrations]);
    }
  } finally {
    await runner.release();
  }
}

/** True when every migration the code knows has been applied. */
export async function migrationsApplied(dataSource: DataSource): Promise<boolean> {
  return !(await dataSource.showMigrations());
}
