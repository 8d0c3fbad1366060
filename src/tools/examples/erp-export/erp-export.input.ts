import { IsString, Length, Matches } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class ErpExportInput {
  @IsString()
  @Length(1, 64)
  @Describe('The company whose ledger is exported (one export per company at a time)')
  company: string;

  @IsString()
  @Matches(/^\d{4}-(0[1-9]|1[0-2])$/, { message: 'period must be a month: YYYY-MM' })
  @Describe('The month exported, YYYY-MM')
  period: string;
}
