import { ConfigSection } from '../config/config-section.js';
import { Env, IntEnv } from '../config/env.decorators.js';

@ConfigSection<HealthConfig>({ module: 'health', summary: 'The readiness probe.' })
export class HealthConfig {
  @Env(
    '`statement_timeout` and `lock_timeout` of the readiness database probe (PostgreSQL cancels it), and the ' +
      'bound of every readiness check',
  )
  @IntEnv(100, 60000)
  HEALTH_DB_TIMEOUT_MS = 2000;
}
