import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { McpProtocolError, McpTool, type ElicitParams, type ToolContext } from '../../tool-dispatch/index.js';
import { answerField } from './fixture-text.js';
import { FilenameInput } from './inputs/filename.input.js';
import { GreetInput } from './inputs/greet.input.js';
import { SlowComputeInput } from './inputs/slow-compute.input.js';

function question(message: string, property: string, type: 'string' | 'boolean'): ElicitParams {
  return {
    message,
    requestedSchema: { type: 'object', properties: { [property]: { type } }, required: [property] },
  };
}

/**
 * The tasks-extension fixtures (conformance.md §2.3). Whether a call becomes a task is decided by the server
 * from `taskSupport`; the handlers only do the work, honour `ctx.signal` (a cancelled task must settle
 * `cancelled`) and ask for input through `ctx.input`.
 */

/** Work done before the first question or failure; longer than TASK_INLINE_WINDOW_MS (100 ms). */
const PREPARE_MS = 300;
@Injectable()
export class TaskToolsService {
  @McpTool({
    name: 'greet',
    description: 'Greets synchronously.',
    input: GreetInput,
    taskSupport: 'forbidden',
  })
  greet(args: GreetInput): string {
    return `Hello, ${args.name}!`;
  }

  @McpTool({
    name: 'slow_compute',
    description: 'Works for `seconds` seconds, then answers; cancellable.',
    input: SlowComputeInput,
    taskSupport: 'optional',
  })
  async slowCompute(args: SlowComputeInput, ctx: ToolContext): Promise<string> {
    if (args.seconds > 0) await sleep(args.seconds * 1000, undefined, { signal: ctx.signal });
    return `Computed ${args.label ?? 'result'} after ${args.seconds} s`;
  }

  @McpTool({
    name: 'failing_job',
    description: 'Fails with a tool error after about a second.',
    taskSupport: 'required',
  })
  async failingJob(_args: unknown, ctx: ToolContext): Promise<never> {
    await sleep(1000, undefined, { signal: ctx.signal });
    throw new Error('failing_job failed on purpose');
  }

  @McpTool({
    name: 'protocol_error_job',
    description: 'Fails at the protocol level (the task ends failed).',
    taskSupport: 'optional',
  })
  async protocolErrorJob(_args: unknown, ctx: ToolContext): Promise<never> {
    // Long enough to outlive the inline window, so the failure is observed on a task.
    await sleep(PREPARE_MS, undefined, { signal: ctx.signal });
    throw new McpProtocolError(-32603, 'protocol_error_job failed on purpose');
  }

  @McpTool({
    name: 'confirm_delete',
    description: 'Asks for confirmation, then pretends to delete the file.',
    input: FilenameInput,
    taskSupport: 'optional',
  })
  async confirmDelete(args: FilenameInput, ctx: ToolContext): Promise<string> {
    // Looks the file up first: past the inline window, so the question parks a task (input_required).
    await sleep(PREPARE_MS, undefined, { signal: ctx.signal });
    const answer = await ctx.input.elicit(question(`Delete ${args.filename}?`, 'confirm', 'boolean'), {
      key: 'confirm_delete',
    });
    const confirmed = answer.action === 'accept' && answer.content?.confirm !== false;
    return confirmed ? `Deleted ${args.filename}` : `Kept ${args.filename}`;
  }

  @McpTool({ name: 'multi_input', description: 'Asks two questions at once.', taskSupport: 'optional' })
  async multiInput(_args: unknown, ctx: ToolContext): Promise<string> {
    await sleep(PREPARE_MS, undefined, { signal: ctx.signal });
    const [first, second] = await Promise.all([
      ctx.input.elicit(question('What is your first name?', 'first_name', 'string'), { key: 'first_name' }),
      ctx.input.elicit(question('What is your last name?', 'last_name', 'string'), { key: 'last_name' }),
    ]);
    return `Hello, ${answerField(first, 'first_name')} ${answerField(second, 'last_name')}!`;
  }

  @McpTool({
    name: 'test_tool_with_task',
    description: 'Asks for a name, then works on it as a task.',
    taskSupport: 'required',
  })
  async toolWithTask(_args: unknown, ctx: ToolContext): Promise<string> {
    const answer = await ctx.input.elicit(question('What is your name?', 'user_name', 'string'), {
      key: 'user_name',
    });
    const name = answerField(answer, 'user_name', 'name');
    await sleep(100, undefined, { signal: ctx.signal });
    return `Task complete for ${name}`;
  }
}
