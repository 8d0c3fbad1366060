import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from '../../src/app.module.js';
import { configureApp } from '../../src/app.setup.js';
import { loadConfig } from '../../src/config/load-config.js';

/**
 * The real AppModule and the production HTTP pipeline (configureApp), listening on an ephemeral loopback
 * port, against the given database.
 */
export async function createTestApp(
  databaseUrl: string,
  env: Record<string, string> = {},
): Promise<INestApplication> {
  const config = loadConfig({ LOG_LEVEL: 'warn', NODE_ENV: 'test', ...env, DATABASE_URL: databaseUrl });
  const app = await NestFactory.create(AppModule.forRoot(config), {
    bodyParser: false,
    logger: ['error', 'warn'],
  });
  configureApp(app);
  await app.listen(0, '127.0.0.1');
  return app;
}
