import { ConfigSection } from '../config/config-section.js';
import { Env, IntEnv } from '../config/env.decorators.js';

@ConfigSection<InstancesConfig>({ module: 'instances', summary: 'The live-instance table.' })
export class InstancesConfig {
  @Env('how often an instance refreshes its `service_instance` row')
  @IntEnv(1000, 600000)
  INSTANCE_HEARTBEAT_MS = 10000;
}
