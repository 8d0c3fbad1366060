import { IsIn, IsInt, IsOptional, Max, Min } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export const REPORT_REGIONS = ['all', 'amer', 'apac', 'emea'] as const;

export class ReportJobInput {
  @IsOptional()
  @IsIn(REPORT_REGIONS)
  @Describe(`Sales region to report on: ${REPORT_REGIONS.join(', ')}`)
  region?: (typeof REPORT_REGIONS)[number] = 'all';

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(120)
  @Describe('Days to aggregate; each day is one step of work (a few seconds each)')
  days?: number = 12;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(200)
  @Describe('Stores per day in the detailed rows')
  storesPerDay?: number = 50;
}
