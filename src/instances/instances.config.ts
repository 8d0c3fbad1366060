import { ConfigSection } from '../config/config-section.js';
import { IsIn } from 'class-validator';
import { Env, IntEnv } from '../config/env.decorators.js';

export const INSTANCE_ROLES = ['all', 'web', 'worker'] as const;
export type InstanceRole = (typeof INSTANCE_ROLES)[number];

@ConfigSection<InstancesConfig>({ module: 'instances', summary: 'The live-instance table.' })
export class InstancesConfig {
  @Env('how often an instance refreshes its `service_instance` row')
  @IntEnv(1000, 600000)
  INSTANCE_HEARTBEAT_MS = 10000;

  @Env(
    '`all` takes MCP calls and runs task work; `web` takes calls and never runs task work (every task is ' +
      'queued for a worker); `worker` runs queued task work and serves only health and metrics (`/mcp` ' +
      'answers 503). See operations.md, Roles',
    { type: INSTANCE_ROLES.join(', ') },
  )
  @IsIn(INSTANCE_ROLES, { message: `INSTANCE_ROLE must be one of ${INSTANCE_ROLES.join(', ')}` })
  INSTANCE_ROLE: InstanceRole = 'all';

  /** Whether this instance runs task work (claims from the queue, leases new tasks to itself). */
  get runsTaskWork(): boolean {
    return this.INSTANCE_ROLE !== 'web';
  }

  /** Whether this instance serves `/mcp`. */
  get servesMcp(): boolean {
    return this.INSTANCE_ROLE !== 'worker';
  }
}
