import { IsInt, Max, Min } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class FlakyJobInput {
  @IsInt()
  @Min(0)
  @Max(10)
  @Describe('How many attempts fail (at once, with a retryable error) before one completes')
  failTimes: number;
}

export class FlakyJobOutput {
  @IsInt()
  @Min(1)
  @Describe('The attempt that completed')
  attempts: number;
}
