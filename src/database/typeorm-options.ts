import type { DataSourceOptions } from 'typeorm';
import { SnakeNamingStrategy } from './snake-naming.strategy.js';

/** The entity classes and migrations of the app: given by the composition root (`src/schema.ts`). */
export interface DatabaseSchema {
  entities: NonNullable<DataSourceOptions['entities']>;
  migrations: NonNullable<DataSourceOptions['migrations']>;
}

export interface DatabaseOptionsInput {
  url: string;
  schema: DatabaseSchema;
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
    entities: input.schema.entities,
    migrations: input.schema.migrations,
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
