import type { DataSourceOptions } from 'typeorm';
import { ENTITIES, MIGRATIONS } from './schema.js';
import { SnakeNamingStrategy } from './snake-naming.strategy.js';

export interface DatabaseOptionsInput {
  url: string;
  poolMax?: number;
  applicationName?: string;
}

/**
 * The single TypeORM options builder, used by the Nest app, the TypeORM CLI data source and the drift check.
 * Migrations never run from here: the app runs them itself under an advisory lock (MigrationsRunner), and
 * `synchronize` stays off everywhere.
 */
export function buildDataSourceOptions(input: DatabaseOptionsInput): DataSourceOptions {
  return {
    type: 'postgres',
    url: input.url,
    entities: ENTITIES,
    migrations: MIGRATIONS,
    migrationsTableName: 'typeorm_migrations',
    migrationsRun: false,
    synchronize: false,
    namingStrategy: new SnakeNamingStrategy(),
    uuidExtension: 'pgcrypto',
    installExtensions: false,
    applicationName: input.applicationName ?? 'mcp-task-server',
    logging: false,
    extra: {
      max: input.poolMax ?? 10,
      // A dead database must not hang a request forever; the pool reports it instead.
      connectionTimeoutMillis: 10000,
    },
  };
}
