import { IsNumber, IsOptional, IsString, Max, Min } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class SlowComputeInput {
  @IsNumber()
  @Min(0)
  @Max(3600)
  @Describe('How long to work, in seconds (0 answers at once)')
  seconds: number;

  @IsOptional()
  @IsString()
  @Describe('A label echoed in the result')
  label?: string;
}
