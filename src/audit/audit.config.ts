import { ConfigSection } from '../config/config-section.js';
import { BoolEnv, Env, IntEnv } from '../config/env.decorators.js';

@ConfigSection<AuditConfig>({
  module: 'audit',
  summary: 'The audit trail: who did what to which task, session or API key, kept in PostgreSQL.',
})
export class AuditConfig {
  @Env(
    'write the audit trail (task changes, sessions, API keys, operator actions, scope refusals) in the same ' +
      'transaction as each change. Off: nothing is recorded (the console then shows no timelines)',
  )
  @BoolEnv()
  AUDIT_ENABLED = true;

  @Env('days an audit row is kept; the janitor deletes older rows in batches of `JANITOR_BATCH_SIZE`')
  @IntEnv(1, 36500)
  AUDIT_RETENTION_DAYS = 90;
}
