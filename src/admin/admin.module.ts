import {
  Logger,
  Module,
  type OnApplicationBootstrap,
  type DynamicModule,
  type MiddlewareConsumer,
  type NestModule,
  type Provider,
} from '@nestjs/common';
import { AuditAdminRepository } from '../audit/audit-admin.repository.js';
import type { LoadedConfig } from '../config/loaded-config.js';
import { InstancesAdminRepository } from '../instances/instances-admin.repository.js';
import { InstancesModule } from '../instances/instances.module.js';
import { PrincipalsConfig } from '../principals/principals.config.js';
import { SessionsAdminRepository } from '../sessions/sessions-admin.repository.js';
import { SessionsModule } from '../sessions/sessions.module.js';
import { TasksModule } from '../tasks/tasks.module.js';
import { AdminActions } from './admin-actions.service.js';
import { AdminAssetsController } from './admin-assets.controller.js';
import { AdminCsrf } from './admin-csrf.js';
import { AdminExceptionFilter } from './admin-exception.filter.js';
import { AdminFormMiddleware } from './admin-form.middleware.js';
import { AdminOperationsController } from './admin-operations.controller.js';
import { AdminQueueController } from './admin-queue.controller.js';
import { AdminRefusals } from './admin-refusals.js';
import { AdminTasksController } from './admin-tasks.controller.js';
import { AdminViews } from './admin-views.js';
import { AdminConfig, adminConsoleState } from './admin.config.js';
import { AdminGuard } from './admin.guard.js';

/** The catch-all controller last: Express matches routes in registration order. */
const CONTROLLERS = [
  AdminTasksController,
  AdminOperationsController,
  AdminQueueController,
  AdminAssetsController,
];

const PROVIDERS: Provider[] = [
  AdminGuard,
  AdminCsrf,
  AdminRefusals,
  AdminViews,
  AdminExceptionFilter,
  AdminActions,
  AuditAdminRepository,
  SessionsAdminRepository,
  InstancesAdminRepository,
];

/**
 * The operator console at /admin (operations.md, Console). Without an admin credential it registers no
 * route at all (/admin is then the app's plain 404), and says why at boot.
 */
@Module({})
export class AdminModule implements NestModule, OnApplicationBootstrap {
  private readonly logger = new Logger('AdminConsole');

  constructor(
    private readonly admin: AdminConfig,
    private readonly principals: PrincipalsConfig,
  ) {}

  static forRoot(config: LoadedConfig): DynamicModule {
    const state = adminConsoleState(config.get(AdminConfig), config.get(PrincipalsConfig));
    if (!state.enabled) return { module: AdminModule };
    return {
      module: AdminModule,
      imports: [InstancesModule, TasksModule, SessionsModule],
      controllers: CONTROLLERS,
      providers: PROVIDERS,
    };
  }

  onApplicationBootstrap(): void {
    const state = adminConsoleState(this.admin, this.principals);
    if (state.enabled) this.logger.log(`the /admin console is on (${state.reason})`);
    // ADMIN_CONSOLE=on that cannot be honoured (outside production; there the boot is refused).
    else if (this.admin.ADMIN_CONSOLE === 'on')
      this.logger.warn(`the /admin console is off: ${state.reason}`);
    else this.logger.log(`the /admin console is off: ${state.reason}`);
  }

  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(AdminFormMiddleware).forRoutes(...CONTROLLERS);
  }
}
