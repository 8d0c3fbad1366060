import { Injectable } from '@nestjs/common';
import { McpTool } from '../../tool-dispatch/index.js';
import { EchoInput } from './echo.input.js';

/**
 * The benchmark's tools (registered only with MCP_BENCH_TOOLS=true). They do no work of their own, so a
 * benchmark measures the server's cost per call: the same three shapes the peers in bench/peers/ expose.
 */
@Injectable()
export class BenchToolsService {
  @McpTool({
    name: 'echo',
    description: 'Returns its text argument (benchmark tool, never a task).',
    input: EchoInput,
    annotations: { readOnlyHint: true, idempotentHint: true },
  })
  echo(args: EchoInput): string | Promise<string> {
    return answer(args);
  }

  @McpTool({
    name: 'echo_task',
    description: 'Returns its text argument; may run as a task (benchmark tool).',
    input: EchoInput,
    taskSupport: 'optional',
  })
  echoTask(args: EchoInput): string | Promise<string> {
    return answer(args);
  }

  @McpTool({
    name: 'echo_task_required',
    description: 'Returns its text argument; always runs as a task (benchmark tool).',
    input: EchoInput,
    taskSupport: 'required',
  })
  echoTaskRequired(args: EchoInput): string | Promise<string> {
    return answer(args);
  }

  // The durable lifecycle against pg-boss (bench/compare.mjs durable-lifecycle): a resumable task goes
  // through the queue and its claim where a plain one is leased at creation.
  @McpTool({
    name: 'echo_task_durable',
    description: 'Returns its text argument; may run as a task, resumable (benchmark tool).',
    input: EchoInput,
    taskSupport: 'optional',
    durability: { resumable: true },
  })
  echoTaskDurable(args: EchoInput): string | Promise<string> {
    return answer(args);
  }
}

/** The text, at once or after delayMs (a plain timer: the benchmark never cancels these). */
function answer(args: EchoInput): string | Promise<string> {
  if (!args.delayMs) return args.text;
  return new Promise((resolve) => setTimeout(() => resolve(args.text), args.delayMs));
}
