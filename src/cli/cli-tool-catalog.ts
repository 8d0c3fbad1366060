import { Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ConfigModule } from '../config/config.module.js';
import type { LoadedConfig } from '../config/loaded-config.js';
import { ToolDispatchModule } from '../tool-dispatch/tool-dispatch.module.js';
import type { ToolDescriptor } from '../tool-dispatch/tool-dispatch.types.js';
import { ToolRegistry } from '../tool-dispatch/tool-registry.service.js';
import { toolModules } from '../tools/tool-modules.js';

/** The tool modules this configuration serves, with the registry that finds their tools, and nothing else. */
@Module({})
class CliToolCatalogModule {
  static forRoot(config: LoadedConfig): DynamicModule {
    return {
      module: CliToolCatalogModule,
      imports: [ConfigModule.forRoot(config), ToolDispatchModule, ...toolModules(config)],
    };
  }
}

/**
 * The tools this deployment serves, as the server's registry declares them (the same tool modules, chosen by
 * the same configuration: run the CLI with the server's environment). Booted as a Nest context of the tool
 * modules alone: no database, no listener, no instance row. A declaration mistake fails here as it fails
 * the server's boot.
 */
export async function loadToolCatalog(config: LoadedConfig): Promise<ToolDescriptor[]> {
  const app = await NestFactory.createApplicationContext(CliToolCatalogModule.forRoot(config), {
    logger: false,
    abortOnError: false,
  });
  try {
    return app.get(ToolRegistry).listTools();
  } finally {
    await app.close();
  }
}
