import 'reflect-metadata';
import type { Server } from 'node:http';
import { ConfigValidationError, loadConfig } from './app.config.js';
import { ServerConfig } from './config/server.config.js';
import { DatabaseConfig } from './database/database.config.js';
import { LoggingConfig } from './logging/logging.config.js';
import { TelemetryConfig } from './telemetry/telemetry.config.js';
import type { EmbeddedPostgresHandle } from './database/embedded-postgres.js';
import { startTracing } from './telemetry/tracing-sdk.js';
import { errorMessage } from './common/error-message.js';

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
  // Tracing first: the auto-instrumentations patch Nest's HTTP stack and pg as they load, so everything
  // that imports them is loaded below, after the SDK started.
  const server = config.get(ServerConfig);
  const database = config.get(DatabaseConfig);
  const telemetry = config.get(TelemetryConfig);
  const tracing = await startTracing(telemetry);
  const [
    { NestFactory },
    { AppModule },
    { configureApp },
    { startEmbeddedPostgres },
    { redactDatabaseUrl },
    { installGracefulShutdown },
    { AppLogger },
  ] = await Promise.all([
    import('@nestjs/core'),
    import('./app.module.js'),
    import('./app.setup.js'),
    import('./database/embedded-postgres.js'),
    import('./database/redact-url.js'),
    import('./lifecycle/graceful-shutdown.js'),
    import('./logging/app-logger.js'),
  ]);
  const logger = new AppLogger({ json: server.isProduction, level: config.get(LoggingConfig).LOG_LEVEL });
  if (tracing.enabled) logger.log(`tracing on (exporter: ${telemetry.OTEL_TRACES_EXPORTER})`, 'Bootstrap');
  // A promise nobody awaited must not take every session and task of this instance down with it.
  process.on('unhandledRejection', (reason: unknown) => {
    logger.error(
      `unhandled rejection: ${errorMessage(reason)}`,
      reason instanceof Error ? reason.stack : undefined,
      'Process',
    );
  });

  let embedded: EmbeddedPostgresHandle | undefined;
  if (!database.DATABASE_URL) {
    if (server.isProduction) {
      logger.fatal(
        'NODE_ENV=production needs DATABASE_URL; the embedded PostgreSQL is for development only',
        'Bootstrap',
      );
      process.exit(1);
    }
    embedded = await startEmbeddedPostgres({
      dataDir: database.DATA_DIR,
      createOsUser: database.EMBEDDED_PG_CREATE_USER,
      log: (m) => logger.log(m, 'EmbeddedPostgres'),
    });
    database.DATABASE_URL = embedded.url;
    logger.log(`database: embedded PostgreSQL (${embedded.dataDir})`, 'Bootstrap');
  } else {
    logger.log(`database: ${redactDatabaseUrl(database.DATABASE_URL)}`, 'Bootstrap');
  }

  try {
    const app = await NestFactory.create(AppModule.forRoot(config), { bodyParser: false, logger });
    configureApp(app);
    await app.listen(server.PORT, server.HOST);
    installGracefulShutdown(app, logger, async () => {
      await tracing.shutdown().catch(() => undefined);
      await embedded?.stop();
    });
    const address = (app.getHttpServer() as Server).address();
    const port = typeof address === 'object' && address ? address.port : server.PORT;
    logger.log(`listening on http://${server.HOST}:${port}`, 'Bootstrap');
  } catch (err) {
    logger.fatal(`startup failed: ${errorMessage(err)}`, 'Bootstrap');
    await embedded?.stop().catch(() => undefined);
    process.exit(1);
  }
}

bootstrap().catch((err: unknown) => {
  process.stderr.write(`fatal: ${errorMessage(err)}\n`);
  process.exit(1);
});
