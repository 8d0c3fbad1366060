import { Module, type DynamicModule, type Type } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { AdminModule } from './admin/admin.module.js';
import { AuditModule } from './audit/audit.module.js';
import { BusModule } from './bus/bus.module.js';
import { AllExceptionsFilter } from './common/all-exceptions.filter.js';
import type { LoadedConfig } from './config/loaded-config.js';
import { ConfigModule } from './config/config.module.js';
import { DatabaseModule } from './database/database.module.js';
import { GatewayModule } from './gateway/gateway.module.js';
import { HealthModule } from './health/health.module.js';
import { InstancesModule } from './instances/instances.module.js';
import { JanitorModule } from './janitor/janitor.module.js';
import { LifecycleModule } from './lifecycle/lifecycle.module.js';
import { QuotasModule } from './quotas/quotas.module.js';
import { MetricsModule } from './metrics/metrics.module.js';
import { PrincipalsModule } from './principals/principals.module.js';
import { ToolDispatchModule } from './tool-dispatch/tool-dispatch.module.js';
import { toolModules } from './tools/tool-modules.js';
import { TasksModule } from './tasks/tasks.module.js';
import { SCHEMA } from './schema.js';
import { TaskWorkModule } from './tasks/mcp/task-work.module.js';
import { TasksMcpModule } from './tasks/mcp/tasks-mcp.module.js';
import type { TaskWork } from './tasks/execution/task-work.port.js';

/** What a test may change in the composition root. */
export interface AppModuleOptions {
  /** The tool modules to serve instead of `toolModules(config)` (the testing kit's server level). */
  toolModules?: (Type | DynamicModule)[];
  /** The work every task runs instead of its tool call (a test's or a benchmark's controlled work). */
  taskWork?: TaskWork;
}

/** Composition root. The validated config comes in from main.ts (or a test) with DATABASE_URL resolved. */
@Module({})
export class AppModule {
  static forRoot(config: LoadedConfig, options: AppModuleOptions = {}): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        LifecycleModule,
        MetricsModule,
        QuotasModule,
        DatabaseModule.forRoot(SCHEMA),
        ScheduleModule.forRoot(),
        HealthModule,
        InstancesModule,
        BusModule,
        AuditModule,
        PrincipalsModule,
        ToolDispatchModule,
        ...(options.toolModules ?? toolModules(config)),
        GatewayModule,
        TaskWorkModule.forRoot(options.taskWork),
        TasksModule,
        TasksMcpModule,
        JanitorModule,
        AdminModule.forRoot(config),
      ],
      providers: [{ provide: APP_FILTER, useClass: AllExceptionsFilter }],
    };
  }
}
