import { IsInt, Max, Min } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class DurableStepsInput {
  @IsInt()
  @Min(1)
  @Max(1000)
  @Describe('How many steps to run, one after another (each checkpointed)')
  steps: number;

  @IsInt()
  @Min(0)
  @Max(60000)
  @Describe('How long each step takes, in ms')
  stepMs: number;
}

export class DurableStepsOutput {
  @IsInt()
  @Min(1)
  @Describe('Steps done in all, over every run')
  completedSteps: number;

  @IsInt()
  @Min(1)
  @Describe('The run the task finished on (1 when never interrupted)')
  attempts: number;

  @IsInt()
  @Min(0)
  @Describe('The checkpoint (steps done) the last run started from; 0 when fresh')
  resumedFromStep: number;
}
