import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { McpTool, type CallToolResult, type ToolContext } from '../../tool-dispatch/index.js';
import { LimitedJobInput, LimitedJobOutput } from './inputs/limited-job.input.js';

/**
 * The fixture of sharing the queue (tool-authoring.md, "Sharing the queue"): a tool whose downstream takes
 * at most two calls at once, and one per key. Its result says when its run started and finished, so a
 * client can check from outside that no two runs overlapped beyond the limits.
 */
@Injectable()
export class LimitedToolsService {
  @McpTool({
    name: 'limited_job',
    description:
      'Sleeps `ms` and returns when its run started and finished; at most 2 runs at once across all ' +
      'instances and at most 1 per `key`.',
    input: LimitedJobInput,
    output: LimitedJobOutput,
    taskSupport: 'optional',
    limits: { concurrency: 2, perKey: { argument: 'key', concurrency: 1 } },
  })
  async limitedJob(args: LimitedJobInput, ctx: ToolContext): Promise<CallToolResult> {
    const startedAt = Date.now();
    if (args.ms > 0) await sleep(args.ms, undefined, { signal: ctx.signal });
    const out: LimitedJobOutput = { startedAt, finishedAt: Date.now(), key: args.key };
    return {
      content: [{ type: 'text', text: JSON.stringify(out) }],
      structuredContent: { ...out },
    };
  }
}
