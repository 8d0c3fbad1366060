import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { McpTool, type CallToolResult, type ToolContext } from '../../tool-dispatch/index.js';
import { DurableStepsInput, DurableStepsOutput } from './inputs/durable-steps.input.js';
import { FlakyJobInput, FlakyJobOutput } from './inputs/flaky-job.input.js';

/** What durable_steps keeps between runs. */
interface StepsCheckpoint {
  completedSteps: number;
}

function stepsDone(saved: unknown): number {
  const n = (saved as Partial<StepsCheckpoint> | null | undefined)?.completedSteps;
  return typeof n === 'number' && Number.isInteger(n) && n >= 0 ? n : 0;
}

/**
 * The durable-execution fixtures, written with the public tool API only: work that resumes from
 * its checkpoint after a hand-over or a rescue, and work that fails its first attempts on purpose so the
 * retry policy's backoff can be observed.
 */
@Injectable()
export class DurableToolsService {
  @McpTool({
    name: 'durable_steps',
    description:
      'Runs `steps` steps of `stepMs` each, checkpointing after each; a later run resumes after the last ' +
      'checkpointed step.',
    input: DurableStepsInput,
    output: DurableStepsOutput,
    taskSupport: 'optional',
    // 1000 steps of a minute at most: the ttl a client gets without asking covers the longest run.
    durability: {
      resumable: true,
      retry: { maxAttempts: 5, initialDelayMs: 1000 },
      maxRunMs: 1000 * 60000,
    },
  })
  async durableSteps(args: DurableStepsInput, ctx: ToolContext): Promise<CallToolResult> {
    const resumedFromStep = Math.min(stepsDone(ctx.lastCheckpoint), args.steps);
    for (let step = resumedFromStep + 1; step <= args.steps; step++) {
      if (args.stepMs > 0) await sleep(args.stepMs, undefined, { signal: ctx.signal });
      else ctx.signal.throwIfAborted();
      await ctx.checkpoint({ completedSteps: step } satisfies StepsCheckpoint);
      await ctx.progress({ progress: step, total: args.steps, message: `step ${step} of ${args.steps}` });
    }
    const out: DurableStepsOutput = {
      completedSteps: args.steps,
      attempts: ctx.attempt,
      resumedFromStep,
    };
    return {
      content: [
        {
          type: 'text',
          text:
            `Completed ${out.completedSteps} steps on attempt ${out.attempts} ` +
            `(resumed from step ${out.resumedFromStep})`,
        },
      ],
      structuredContent: { ...out },
    };
  }

  @McpTool({
    name: 'flaky_job',
    description: 'Fails its first `failTimes` attempts at once with a retryable error, then completes.',
    input: FlakyJobInput,
    output: FlakyJobOutput,
    taskSupport: 'optional',
    durability: { retry: { maxAttempts: 5, initialDelayMs: 200, factor: 2, maxDelayMs: 1000 } },
  })
  flakyJob(args: FlakyJobInput, ctx: ToolContext): CallToolResult {
    if (ctx.attempt <= args.failTimes) {
      throw new Error(`flaky_job attempt ${ctx.attempt} failed on purpose (${args.failTimes} set to fail)`);
    }
    return {
      content: [{ type: 'text', text: `flaky_job completed on attempt ${ctx.attempt}` }],
      structuredContent: { attempts: ctx.attempt },
    };
  }
}
