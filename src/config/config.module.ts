import { Global, Module, type DynamicModule } from '@nestjs/common';
import { LoadedConfig } from './loaded-config.js';

/**
 * Provides the configuration that main.ts (or a test) validated before the container was built: every
 * module's config class, each injected by class (`constructor(private readonly config: TasksConfig)`).
 */
@Global()
@Module({})
export class ConfigModule {
  static forRoot(config: LoadedConfig): DynamicModule {
    const providers = [
      { provide: LoadedConfig, useValue: config },
      ...config.entries().map(([cls, value]) => ({ provide: cls, useValue: value })),
    ];
    return { module: ConfigModule, providers, exports: providers.map((p) => p.provide) };
  }
}
