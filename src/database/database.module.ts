import { type DynamicModule, Injectable, Logger, Module, type OnModuleInit } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { DatabaseConfig } from './database.config.js';
import { runMigrationsLocked } from './migrations-runner.js';
import { PoolMetrics } from './pool-metrics.js';
import { retireConnectionsOnReadOnly } from './read-only-connections.js';
import { initStatementMode, poolOf } from './statement-mode.js';
import { buildDataSourceOptions, type DatabaseSchema } from './typeorm-options.js';

/** Applies pending migrations during module init, before any feature module touches a table. */
@Injectable()
export class MigrationsOnBoot implements OnModuleInit {
  private readonly logger = new Logger('Migrations');

  constructor(
    private readonly dataSource: DataSource,
    private readonly config: DatabaseConfig,
  ) {}

  async onModuleInit(): Promise<void> {
    if (!this.config.DB_MIGRATIONS_RUN) {
      this.logger.log('DB_MIGRATIONS_RUN=false: not running migrations');
      return;
    }
    const applied = await runMigrationsLocked(this.dataSource);
    this.logger.log(
      applied.length > 0
        ? `applied ${applied.length} migration(s): ${applied.map((m) => m.name).join(', ')}`
        : 'schema up to date',
    );
  }
}

/**
 * Finds out before the first request whether the pool keeps named prepared statements (a transaction-mode
 * pooler may not), unless DB_PREPARED_STATEMENTS forces a mode; logs the mode either way.
 */
@Injectable()
export class StatementModeOnBoot implements OnModuleInit {
  private readonly logger = new Logger('Database');

  constructor(
    private readonly dataSource: DataSource,
    private readonly config: DatabaseConfig,
  ) {}

  async onModuleInit(): Promise<void> {
    await initStatementMode(poolOf(this.dataSource), this.config.DB_PREPARED_STATEMENTS, (m) =>
      this.logger.log(m),
    );
  }
}

/**
 * A connection that reached a read-only server (a standby the address still led to after a failover) is
 * closed at its release, so the pool reconnects and finds the primary once the address moves back.
 */
@Injectable()
export class ReadOnlyConnectionsOnBoot implements OnModuleInit {
  constructor(private readonly dataSource: DataSource) {}

  onModuleInit(): void {
    retireConnectionsOnReadOnly(poolOf(this.dataSource));
  }
}

/**
 * The data source, its migrations on boot and its pool metrics. The schema comes from the composition root
 * (`src/schema.ts`), so this infrastructure module never imports a feature's entities.
 */
@Module({})
export class DatabaseModule {
  static forRoot(schema: DatabaseSchema): DynamicModule {
    return {
      module: DatabaseModule,
      imports: [
        TypeOrmModule.forRootAsync({
          inject: [DatabaseConfig],
          useFactory: (config: DatabaseConfig) => {
            if (!config.DATABASE_URL) throw new Error('DATABASE_URL was not resolved before the app started');
            return {
              ...buildDataSourceOptions({ url: config.DATABASE_URL, poolMax: config.DB_POOL_MAX, schema }),
              retryAttempts: 0,
            };
          },
        }),
      ],
      providers: [ReadOnlyConnectionsOnBoot, MigrationsOnBoot, StatementModeOnBoot, PoolMetrics],
    };
  }
}
