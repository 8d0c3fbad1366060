/**
 * Every module's config class, registered by importing its file (each decorates itself with
 * `@ConfigSection`). Entry points (main.ts, the CLI, the TypeORM CLI, the testing kit, tests) load config
 * through this file so that one pass validates all of them; `app.config.spec.ts` fails when a `*.config.ts`
 * under src/ is missing here. These files import nothing but the config decorators: main.ts loads them
 * before tracing starts.
 */
import './config/server.config.js';
import './admin/admin.config.js';
import './audit/audit.config.js';
import './bus/bus.config.js';
import './database/database.config.js';
import './gateway/gateway.config.js';
import './health/health.config.js';
import './instances/instances.config.js';
import './janitor/janitor.config.js';
import './lifecycle/lifecycle.config.js';
import './logging/logging.config.js';
import './metrics/metrics.config.js';
import './principals/principals.config.js';
import './protocol/protocol.config.js';
import './quotas/quotas.config.js';
import './sessions/sessions.config.js';
import './tasks/tasks.config.js';
import './telemetry/telemetry.config.js';
import './tools/tools.config.js';
import './tools/examples/examples.config.js';

export {
  ConfigValidationError,
  loadRegisteredConfig as loadConfig,
  registeredConfigKeys as configKeys,
} from './config/load-config.js';
export type { LoadConfigOptions } from './config/load-config.js';
export { LoadedConfig } from './config/loaded-config.js';
