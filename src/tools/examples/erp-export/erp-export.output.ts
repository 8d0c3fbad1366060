import { IsInt, IsString } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class ErpExportOutput {
  @IsString()
  @Describe('The company exported')
  company: string;

  @IsString()
  @Describe('The month exported')
  period: string;

  @IsInt()
  @Describe('Ledger rows in the export')
  rows: number;

  @IsInt()
  @Describe('When the ERP started the export (epoch ms)')
  startedAt: number;

  @IsInt()
  @Describe('When it finished (epoch ms)')
  finishedAt: number;
}
