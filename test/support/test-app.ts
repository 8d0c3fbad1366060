import {
  Module,
  type DynamicModule,
  type INestApplication,
  type LoggerService,
  type LogLevel,
  type Type,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from '../../src/app.module.js';
import { configureApp } from '../../src/app.setup.js';
import type { TaskWork } from '../../src/tasks/execution/task-work.port.js';
import { loadConfig } from '../../src/app.config.js';

@Module({})
class TestRootModule {}

/**
 * The real AppModule and the production HTTP pipeline (configureApp), listening on an ephemeral loopback
 * port, against the given database. `imports` adds test-only modules (a probe controller, say) beside it;
 * `options.logger` replaces the default console logger (to capture what the app logs), or narrows the levels
 * Nest logs (the fuzz tier keeps its thousands of refusals out of the output); `options.taskWork` replaces
 * the work every task runs (a ControlledExecutor, say).
 */
export async function createTestApp(
  databaseUrl: string,
  env: Record<string, string> = {},
  imports: (Type | DynamicModule)[] = [],
  options: { logger?: LoggerService | LogLevel[]; taskWork?: TaskWork } = {},
): Promise<INestApplication> {
  const config = loadConfig({ LOG_LEVEL: 'warn', NODE_ENV: 'test', ...env, DATABASE_URL: databaseUrl });
  const root: DynamicModule =
    imports.length === 0
      ? AppModule.forRoot(config, { taskWork: options.taskWork })
      : {
          module: TestRootModule,
          imports: [AppModule.forRoot(config, { taskWork: options.taskWork }), ...imports],
        };
  const app = await NestFactory.create(root, {
    bodyParser: false,
    logger: options.logger ?? ['error', 'warn'],
  });
  configureApp(app);
  await app.listen(0, '127.0.0.1');
  return app;
}

/**
 * The app's address as clients here dial it: Nest reports the IPv6 loopback when it listens on every
 * address, and the tests (and the Host/Origin checks) use 127.0.0.1. `path` is appended (e.g. `/mcp`).
 */
export async function loopbackUrl(app: INestApplication, path = ''): Promise<string> {
  return `${(await app.getUrl()).replace('[::1]', '127.0.0.1')}${path}`;
}
