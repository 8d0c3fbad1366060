import { Controller, Get, Header, Res } from '@nestjs/common';
import type { Response } from 'express';
import { InstancesConfig } from '../instances/instances.config.js';
import { HealthService } from './health.service.js';

@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthService,
    private readonly instances: InstancesConfig,
  ) {}

  /** The process answers: nothing external is consulted, so a database blip never restarts every pod. */
  @Get('live')
  @Header('Cache-Control', 'no-store')
  live(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('ready')
  @Header('Cache-Control', 'no-store')
  async ready(@Res({ passthrough: true }) res: Response): Promise<unknown> {
    const report = await this.health.readiness();
    res.status(report.status === 'ok' ? 200 : 503);
    // What this instance does (INSTANCE_ROLE), so an operator can tell web, worker and all apart.
    return { ...report, role: this.instances.INSTANCE_ROLE };
  }
}
