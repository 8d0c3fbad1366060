import { ConfigSection } from '../config/config-section.js';
import { Env, IntEnv } from '../config/env.decorators.js';

@ConfigSection<LifecycleConfig>({ module: 'lifecycle', summary: 'Draining and shutdown on SIGTERM.' })
export class LifecycleConfig {
  @Env(
    'on SIGTERM, after the drain delay, how long in-flight requests and running tasks may finish (tasks of ' +
      'resumable tools do not wait: they are handed over to the queue at the signal)',
  )
  @IntEnv(0, 600000)
  SHUTDOWN_GRACE_MS = 10000;

  @Env(
    'on SIGTERM, how long readiness is 503 while requests are still served (each connection closed after its ' +
      "answer) before the instance stops listening; longer than the balancer's idle keep-alive (nginx: 2 s)",
  )
  @IntEnv(0, 600000)
  SHUTDOWN_DRAIN_DELAY_MS = 3000;
}
