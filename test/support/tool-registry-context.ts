import { Module, type DynamicModule, type INestApplicationContext, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ToolDispatchModule } from '../../src/tool-dispatch/tool-dispatch.module.js';
import { ToolRegistry } from '../../src/tool-dispatch/tool-registry.service.js';

@Module({})
class RegistryTestRoot {}

/**
 * A Nest application context holding ToolDispatchModule and the given modules, initialised (so discovery has
 * run). Startup failures are thrown, not turned into process.exit.
 */
export async function bootToolRegistry(
  ...modules: (Type | DynamicModule)[]
): Promise<{ app: INestApplicationContext; registry: ToolRegistry }> {
  const root: DynamicModule = { module: RegistryTestRoot, imports: [ToolDispatchModule, ...modules] };
  const app = await NestFactory.createApplicationContext(root, { logger: false, abortOnError: false });
  return { app, registry: app.get(ToolRegistry) };
}

/** The error that stops startup with these modules; fails the test when startup succeeds. */
export async function bootToolRegistryFailure(...modules: (Type | DynamicModule)[]): Promise<Error> {
  let app: INestApplicationContext | undefined;
  try {
    ({ app } = await bootToolRegistry(...modules));
  } catch (err) {
    return err as Error;
  }
  await app.close();
  throw new Error('startup was expected to fail');
}
