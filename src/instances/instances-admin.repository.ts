import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { ServiceInstance } from './service-instance.entity.js';

export interface InstanceAdminRow extends ServiceInstance {
  /** Live tasks whose lease this instance holds. */
  liveTasks: number;
}

/** Operator view of service_instance rows with the live tasks each one runs. */
@Injectable()
export class InstancesAdminRepository {
  constructor(private readonly dataSource: DataSource) {}

  /** Newest first; stopped instances only when asked. */
  async list(includeStopped: boolean): Promise<InstanceAdminRow[]> {
    const q = this.dataSource.getRepository(ServiceInstance).createQueryBuilder('i');
    if (!includeStopped) q.where('i.stopped_at IS NULL');
    const rows = await q.orderBy('i.started_at', 'DESC').getMany();
    if (rows.length === 0) return [];
    const counts = await this.dataSource.query<{ instance_id: string; n: string }[]>(
      `SELECT instance_id, count(*) AS n FROM task
        WHERE status IN ('working', 'input_required') AND instance_id = ANY($1::uuid[])
        GROUP BY instance_id`,
      [rows.map((r) => r.id)],
    );
    const byId = new Map(counts.map((c) => [c.instance_id, Number(c.n)]));
    return rows.map((r) => Object.assign(r, { liveTasks: byId.get(r.id) ?? 0 }));
  }

  /**
   * The console's instances: every one not stopped, and those stopped in the last `stoppedWithinMs`, newest
   * first, at most `limit` (the table keeps every process that ever ran).
   */
  async consoleInstances(stoppedWithinMs: number, limit: number): Promise<ServiceInstance[]> {
    return this.dataSource
      .getRepository(ServiceInstance)
      .createQueryBuilder('i')
      .where('i.stopped_at IS NULL')
      .orWhere(`i.stopped_at > now() - :ms * interval '1 millisecond'`, { ms: stoppedWithinMs })
      .orderBy('i.started_at', 'DESC')
      .limit(limit)
      .getMany();
  }
}
