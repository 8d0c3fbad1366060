import { DataSource } from 'typeorm';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
import { migrationsApplied, runMigrationsLocked } from './migrations-runner.js';
import { MIGRATIONS, SCHEMA } from '../schema.js';
import { buildDataSourceOptions } from './typeorm-options.js';

describe('migrations on real PostgreSQL', () => {
  let db: TestDatabase;
  const sources: DataSource[] = [];

  beforeEach(async () => {
    db = await createTestDatabase('migr');
  });
  afterEach(async () => {
    await Promise.all(sources.splice(0).map((s) => s.destroy()));
    await db.drop();
  });

  async function source(): Promise<DataSource> {
    const ds = new DataSource(buildDataSourceOptions({ url: db.url, poolMax: 3, schema: SCHEMA }));
    await ds.initialize();
    sources.push(ds);
    return ds;
  }

  it('applies each migration exactly once when several instances migrate at the same moment', async () => {
    const all = await Promise.all([source(), source(), source(), source()]);
    expect(await migrationsApplied(all[0])).toBe(false);
    const results = await Promise.all(all.map((ds) => runMigrationsLocked(ds)));
    const appliedCounts = results.map((r) => r.length).sort();
    expect(appliedCounts).toEqual([0, 0, 0, MIGRATIONS.length]);
    const rows = await withClient(db.url, (c) => c.query('SELECT name FROM typeorm_migrations'));
    expect(rows.rowCount).toBe(MIGRATIONS.length);
    expect(await migrationsApplied(all[1])).toBe(true);
  });

  it('leaves no drift between the entities and the migrations', async () => {
    const ds = await source();
    await runMigrationsLocked(ds);
    const pending = await ds.driver.createSchemaBuilder().log();
    expect(pending.upQueries.map((q) => q.query)).toEqual([]);
  });

  it('detects drift when the schema differs from the entities', async () => {
    const ds = await source();
    await runMigrationsLocked(ds);
    await withClient(db.url, (c) => c.query('ALTER TABLE service_instance DROP COLUMN version'));
    const pending = await ds.driver.createSchemaBuilder().log();
    expect(pending.upQueries.some((q) => q.query.includes('"version"'))).toBe(true);
  });

  it('reverts cleanly', async () => {
    const ds = await source();
    await runMigrationsLocked(ds);
    for (let i = 0; i < MIGRATIONS.length; i++) await ds.undoLastMigration();
    const tables = await withClient(db.url, (c) =>
      c.query(
        `SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'typeorm_migrations'`,
      ),
    );
    expect(tables.rows).toEqual([]);
  });
});
