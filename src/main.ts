import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { Server } from 'node:http';
import { AppModule } from './app.module.js';
import { configureApp } from './app.setup.js';
import { ConfigValidationError, loadConfig } from './config/load-config.js';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from './database/embedded-postgres.js';
import { redactDatabaseUrl } from './database/redact-url.js';
import { installGracefulShutdown } from './lifecycle/graceful-shutdown.js';
import { AppLogger } from './logging/app-logger.js';

async function bootstrap(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigValidationError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const logger = new AppLogger({ json: config.isProduction, level: config.LOG_LEVEL });
  // A promise nobody awaited must not take every session and task of this instance down with it.
  process.on('unhandledRejection', (reason: unknown) => {
    logger.error(
      `unhandled rejection: ${reason instanceof Error ? reason.message : String(reason)}`,
      reason instanceof Error ? reason.stack : undefined,
      'Process',
    );
  });

  let embedded: EmbeddedPostgresHandle | undefined;
  if (!config.DATABASE_URL) {
    if (config.isProduction) {
      logger.fatal(
        'NODE_ENV=production needs DATABASE_URL; the embedded PostgreSQL is for development only',
        'Bootstrap',
      );
      process.exit(1);
    }
    embedded = await startEmbeddedPostgres({
      dataDir: config.DATA_DIR,
      createOsUser: config.EMBEDDED_PG_CREATE_USER,
      log: (m) => logger.log(m, 'EmbeddedPostgres'),
    });
    config.DATABASE_URL = embedded.url;
    logger.log(`database: embedded PostgreSQL (${embedded.dataDir})`, 'Bootstrap');
  } else {
    logger.log(`database: ${redactDatabaseUrl(config.DATABASE_URL)}`, 'Bootstrap');
  }

  try {
    const app = await NestFactory.create(AppModule.forRoot(config), { bodyParser: false, logger });
    configureApp(app);
    await app.listen(config.PORT, config.HOST);
    installGracefulShutdown(app, logger, async () => embedded?.stop());
    const address = (app.getHttpServer() as Server).address();
    const port = typeof address === 'object' && address ? address.port : config.PORT;
    logger.log(`listening on http://${config.HOST}:${port}`, 'Bootstrap');
  } catch (err) {
    logger.fatal(`startup failed: ${err instanceof Error ? err.message : String(err)}`, 'Bootstrap');
    await embedded?.stop().catch(() => undefined);
    process.exit(1);
  }
}

bootstrap().catch((err: unknown) => {
  process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
