import { Type } from 'class-transformer';
import { IsArray, IsInt, IsString, Min, ValidateNested } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class ReportRow {
  @IsInt()
  @Min(1)
  @Describe('Day number, from 1')
  day: number;

  @IsString()
  @Describe('Store code')
  store: string;

  @IsInt()
  @Min(0)
  orders: number;

  @IsInt()
  @Min(0)
  @Describe('Revenue in cents')
  revenueCents: number;
}

export class ReportTotals {
  @IsInt()
  @Min(0)
  orders: number;

  @IsInt()
  @Min(0)
  revenueCents: number;
}

/** The report: a summary the model reads first, and every detailed row. */
export class ReportOutput {
  @IsString()
  region: string;

  @IsInt()
  @Min(1)
  days: number;

  @IsInt()
  @Min(0)
  rowCount: number;

  @ValidateNested()
  @Type(() => ReportTotals)
  totals: ReportTotals;

  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => ReportRow)
  rows: ReportRow[];
}
