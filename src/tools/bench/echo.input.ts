import { IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { Describe } from '../../tool-dispatch/index.js';

export class EchoInput {
  @IsString()
  @MaxLength(65_536)
  @Describe('Text returned unchanged')
  text: string;

  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(60_000)
  @Describe('Milliseconds to wait before answering (default 0): lets a benchmark watch a task while it runs')
  delayMs?: number;
}
