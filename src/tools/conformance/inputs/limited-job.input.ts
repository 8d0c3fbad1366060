import { IsInt, IsString, Length, Max, Min } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class LimitedJobInput {
  @IsInt()
  @Min(0)
  @Max(60000)
  @Describe('How long the run sleeps, in ms')
  ms: number;

  @IsString()
  @Length(1, 64)
  @Describe('The downstream resource the run uses: at most one run per key at once')
  key: string;
}

export class LimitedJobOutput {
  @IsInt()
  @Describe('When the run started (epoch ms)')
  startedAt: number;

  @IsInt()
  @Describe('When the run finished (epoch ms)')
  finishedAt: number;

  @IsString()
  @Describe('The key it ran for')
  key: string;
}
