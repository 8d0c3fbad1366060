import { ConfigSection } from '../config/config-section.js';
import { BoolEnv, Env, IntEnv } from '../config/env.decorators.js';

@ConfigSection<JanitorConfig>({
  module: 'janitor',
  summary: 'The periodic sweep of expired tasks, lost runs and old rows (one instance at a time).',
})
export class JanitorConfig {
  @Env('run the periodic janitor on this instance (startup recovery always runs)')
  @BoolEnv()
  JANITOR_ENABLED = true;

  @Env('how often the janitor sweeps (one instance at a time)')
  @IntEnv(1000, 86400000)
  JANITOR_INTERVAL_MS = 60000;

  @Env('rows the janitor touches per transaction')
  @IntEnv(1, 100000)
  JANITOR_BATCH_SIZE = 100;

  @Env(
    'how long the row of a stopped instance (or one marked lapsed: silent for three heartbeats) is kept ' +
      'for the console and `instances list` before the janitor deletes it',
  )
  @IntEnv(1, 87600)
  JANITOR_INSTANCE_RETENTION_HOURS = 168;

  @Env(
    'while the janitor has a backlog, the share of wall time (percent) its batches take: after each full ' +
      'batch it pauses so that batch time / (batch time + pause) stays at this. Lower protects live traffic, ' +
      'higher clears a backlog sooner. Each step of a run goes on for at most `JANITOR_INTERVAL_MS`',
  )
  @IntEnv(1, 100)
  JANITOR_DUTY_PERCENT = 10;
}
