import { IsInt, IsOptional, IsString, Max, Min } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class AnalyseTextInput {
  @IsString()
  @Describe('The text to analyse, line by line')
  text: string;

  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(1000)
  @Describe('Pause per line in milliseconds, to make progress visible')
  delayMs?: number = 0;
}
