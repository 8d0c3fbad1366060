import { Module } from '@nestjs/common';
import { ReportJobService } from './report-job.service.js';

/** Example: a long-running report job (see docs/tool-authoring.md, "Long-running work and tasks"). */
@Module({ providers: [ReportJobService] })
export class ReportJobModule {}
