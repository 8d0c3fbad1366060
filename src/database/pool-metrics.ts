import { Injectable } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import { MetricsService } from '../metrics/metrics.service.js';
import { DatabaseConfig } from './database.config.js';

/** The counters pg.Pool keeps (pg's own public fields). */
interface PoolCounts {
  totalCount: number;
  idleCount: number;
  waitingCount: number;
}

/**
 * The connection pool of this instance, read at scrape time: connections in use and idle, queries waiting
 * for one, and the configured size (saturation = in_use / max). The pool is TypeORM's pg.Pool, reached
 * through its PostgreSQL driver; before the driver connected (or after it closed) nothing is reported.
 */
@Injectable()
export class PoolMetrics {
  constructor(dataSource: DataSource, config: DatabaseConfig, metrics: MetricsService) {
    const registers = [metrics.registry];
    const pool = (): PoolCounts | undefined => {
      const p = (dataSource.driver as unknown as { master?: Partial<PoolCounts> }).master;
      return p && typeof p.totalCount === 'number' ? (p as PoolCounts) : undefined;
    };
    new Gauge({
      name: 'mcp_db_pool_connections',
      help: 'Database pool connections of this instance, by state (in_use, idle).',
      labelNames: ['state'] as const,
      registers,
      collect() {
        const p = pool();
        if (!p) return;
        this.set({ state: 'in_use' }, p.totalCount - p.idleCount);
        this.set({ state: 'idle' }, p.idleCount);
      },
    });
    new Gauge({
      name: 'mcp_db_pool_waiting',
      help: 'Queries of this instance waiting for a free database pool connection.',
      registers,
      collect() {
        const p = pool();
        if (p) this.set(p.waitingCount);
      },
    });
    new Gauge({
      name: 'mcp_db_pool_max',
      help: 'Configured size of the database pool (DB_POOL_MAX).',
      registers,
    }).set(config.DB_POOL_MAX);
  }
}
