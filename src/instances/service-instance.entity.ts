import { Check, Column, Entity, Index, PrimaryColumn } from 'typeorm';
import type { InstanceRole } from './instances.config.js';

/**
 * One row per running (or once-running) server process. Later modules stamp the instance id on the work
 * they own, and operators can see which processes are alive from the heartbeat.
 */
@Entity({ name: 'service_instance' })
@Index('service_instance_heartbeat_idx', ['heartbeatAt'])
@Check('service_instance_role_check', `"role" IN ('all', 'web', 'worker')`)
export class ServiceInstance {
  @PrimaryColumn({ type: 'uuid' })
  id: string;

  @Column({ type: 'text' })
  hostname: string;

  @Column({ type: 'integer' })
  pid: number;

  @Column({ type: 'text' })
  version: string;

  /** INSTANCE_ROLE at start: whether it serves /mcp (all, web), runs task work (all, worker), or both. */
  @Column({ type: 'text', default: 'all' })
  role: InstanceRole;

  @Column({ type: 'timestamptz' })
  startedAt: Date;

  @Column({ type: 'timestamptz' })
  heartbeatAt: Date;

  @Column({ type: 'timestamptz', nullable: true })
  stoppedAt: Date | null;
}
