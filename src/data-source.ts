import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { loadConfig } from './app.config.js';
import { DatabaseConfig } from './database/database.config.js';
import { buildDataSourceOptions } from './database/typeorm-options.js';
import { SCHEMA } from './schema.js';

/**
 * Entry point for the TypeORM CLI (`npm run migration:*`). It needs a real server: set DATABASE_URL.
 */
// The TypeORM CLI serves nothing: only the schema applies, not the HTTP server's production refusals.
const config = loadConfig(process.env, { serving: false }).get(DatabaseConfig);
if (!config.DATABASE_URL) {
  throw new Error('The TypeORM CLI needs DATABASE_URL (postgres://user@host:port/db).');
}
export default new DataSource(
  buildDataSourceOptions({
    url: config.DATABASE_URL,
    applicationName: 'mcp-task-server-cli',
    schema: SCHEMA,
  }),
);
