import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { runMigrationsLocked } from './database/migrations-runner.js';
import { buildDataSourceOptions } from './database/typeorm-options.js';
import { errorMessage } from './common/error-message.js';
import { SCHEMA } from './schema.js';
import { loadConfig } from './app.config.js';
import { DatabaseConfig } from './database/database.config.js';

/**
 * CI gate: apply every migration to DATABASE_URL, then ask TypeORM what it would still change to match the
 * entities. Any pending statement means an entity changed without a migration; print it and fail.
 */
async function main(): Promise<void> {
  const config = loadConfig(process.env, { serving: false }).get(DatabaseConfig);
  if (!config.DATABASE_URL) throw new Error('schema drift check needs DATABASE_URL');
  const ds = new DataSource(
    buildDataSourceOptions({ url: config.DATABASE_URL, applicationName: 'mcp-schema-drift', schema: SCHEMA }),
  );
  await ds.initialize();
  try {
    await runMigrationsLocked(ds);
    const sql = await ds.driver.createSchemaBuilder().log();
    if (sql.upQueries.length > 0) {
      console.error('Schema drift: the entities differ from the migrations. Missing statements:');
      for (const q of sql.upQueries) console.error(`  ${q.query};`);
      console.error('Generate a migration: npm run migration:generate -- migrations/<name>');
      process.exitCode = 1;
    } else {
      console.log('Schema drift check: entities and migrations agree.');
    }
  } finally {
    await ds.destroy();
  }
}

main().catch((err: unknown) => {
  console.error(errorMessage(err));
  process.exitCode = 1;
});
