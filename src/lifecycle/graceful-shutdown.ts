import type { INestApplication, LoggerService } from '@nestjs/common';
import type { Server } from 'node:http';
import { AppConfig } from '../config/app-config.js';
import { LifecycleService } from './lifecycle.service.js';

/**
 * SIGTERM/SIGINT: turn readiness to 503 and refuse new MCP requests at once, give in-flight requests up to
 * SHUTDOWN_GRACE_MS, then cut what is left, close the app (HTTP server, database pool) and finally run
 * `afterClose` (stopping the embedded PostgreSQL, which must outlive the pool).
 */
export function installGracefulShutdown(
  app: INestApplication,
  logger: LoggerService,
  afterClose: () => Promise<void>,
): void {
  const lifecycle = app.get(LifecycleService);
  const { SHUTDOWN_GRACE_MS } = app.get(AppConfig);
  let started = false;

  const run = async (signal: string): Promise<void> => {
    logger.log(`${signal} received: draining (grace ${SHUTDOWN_GRACE_MS} ms)`, 'Shutdown');
    lifecycle.beginDrain();
    const idle = await lifecycle.waitForIdle(SHUTDOWN_GRACE_MS);
    if (!idle) {
      logger.warn(
        `${lifecycle.inFlightRequests} request(s) still running after the grace period; closing them`,
        'Shutdown',
      );
    }
    const server = app.getHttpServer() as Server;
    server.closeAllConnections();
    await app.close();
    await afterClose();
    logger.log('stopped', 'Shutdown');
  };

  const onSignal = (signal: NodeJS.Signals): void => {
    if (started) return;
    started = true;
    run(signal).then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error(
          `shutdown failed: ${err instanceof Error ? err.message : String(err)}`,
          undefined,
          'Shutdown',
        );
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}
