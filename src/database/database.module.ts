import { type DynamicModule, Injectable, Logger, Module, type OnModuleInit } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { DatabaseConfig } from './database.config.js';
import { runMigrationsLocked } from './migrations-runner.js';
import { PoolMetrics } from './pool-metrics.js';
import { retireConnectionsOnReadOnly } from './read-only-connections.js';
import { initStatementMode, poolOf } from './statement-mode.js';
import { buildDataSourceOptions, type DatabaseSchema } from './typeorm-options.js';

/**
 * Gets the database ready during module init, before any feature module touches a table: pending migrations
 * first, then the statement-mode probe (unless DB_PREPARED_STATEMENTS forces a mode). One after the other:
 * the migrations hold two connections (the advisory lock's and the migrations' own) and the probe two more,
 * so run side by side they deadlocked a pool of two.
 */
@Injectable()
export class DatabaseOnBoot implements OnModuleInit {
  private readonly migrationsLogger = new Logger('Migrations');
  private readonly logger = new Logger('Database');

  constructor(
    private readonly dataSource: DataSource,
    private readonly config: DatabaseConfig,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.migrate();
    await initStatementMode(poolOf(this.dataSource), this.config.DB_PREPARED_STATEMENTS, (m) =>
      this.logger.log(m),
    );
  }

  private async migrate(): Promise<void> {
    if (!this.config.DB_MIGRATIONS_RUN) {
      this.migrationsLogger.log('DB_MIGRATIONS_RUN=false: not running migrations');
      return;
    }
    const applied = await runMigrationsLocked(this.dataSource);
    this.migrationsLogger.log(
      applied.length > 0
        ? `applied ${applied.length} migration(s): ${applied.map((m) => m.name).join(', ')}`
        : 'schema up to date',
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
      providers: [ReadOnlyConnectionsOnBoot, DatabaseOnBoot, PoolMetrics],
    };
  }
}
