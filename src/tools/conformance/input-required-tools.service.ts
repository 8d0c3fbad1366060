import { Injectable } from '@nestjs/common';
import {
  McpPrompt,
  McpTool,
  type ElicitParams,
  type JsonObject,
  type PromptMessage,
  type SampleParams,
  type ToolContext,
} from '../../tool-dispatch/index.js';
import { answerField, describeElicitation, sampledText } from './fixture-text.js';

const NAME_QUESTION: ElicitParams = {
  message: 'What is your name?',
  requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
};

const CONFIRM_QUESTION: ElicitParams = {
  message: 'Please confirm',
  requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
};

function sampling(text: string, maxTokens: number): SampleParams {
  return { messages: [{ role: 'user', content: { type: 'text', text } }], maxTokens };
}

/**
 * The 2026-07-28 draft fixtures (conformance.md §2.2) that need nothing beyond the public API. Each asks for
 * input through `ctx.input` with the request key the scenario expects; the protocol layer turns those calls
 * into `input_required` rounds (MRTR), signs `requestState`, and re-runs the handler with the answers, so
 * these handlers are written to reach the same questions again on every run. Left out: the list-changed
 * triggers (`test_trigger_tool_change`, `test_trigger_prompt_change`), which need notification hooks.
 */
@Injectable()
export class InputRequiredToolsService {
  @McpTool({ name: 'test_missing_capability', description: 'Needs the sampling client capability.' })
  async missingCapability(_args: unknown, ctx: ToolContext): Promise<string> {
    const answer = await ctx.input.sample(sampling('Anything.', 16), { key: 'needs_sampling' });
    return `Sampling capability was declared: ${sampledText(answer)}`;
  }

  @McpTool({
    name: 'test_logging_tool',
    description: 'Logs once; the edge drops it unless a log level was set.',
  })
  async loggingTool(_args: unknown, ctx: ToolContext): Promise<string> {
    await ctx.log('info', 'logging tool ran', 'conformance-fixture');
    return 'Logging fixture executed.';
  }

  @McpTool({
    name: 'test_streaming_elicitation',
    description: 'Asks for input; never a server-to-client request.',
  })
  async streamingElicitation(_args: unknown, ctx: ToolContext): Promise<string> {
    const answer = await ctx.input.elicit(NAME_QUESTION, { key: 'user_name' });
    return `Elicitation completed: ${describeElicitation(answer)}`;
  }

  @McpTool({ name: 'test_input_required_result_elicitation', description: 'MRTR: one elicitation.' })
  async elicitation(_args: unknown, ctx: ToolContext): Promise<string> {
    const answer = await ctx.input.elicit(NAME_QUESTION, { key: 'user_name' });
    return `Hello, ${answerField(answer, 'name')}!`;
  }

  @McpTool({ name: 'test_input_required_result_sampling', description: 'MRTR: one sampling request.' })
  async sampling(_args: unknown, ctx: ToolContext): Promise<string> {
    const answer = await ctx.input.sample(sampling('What is the capital of France?', 100), {
      key: 'capital_question',
    });
    return `Sampling response: ${sampledText(answer)}`;
  }

  @McpTool({ name: 'test_input_required_result_list_roots', description: 'MRTR: one roots/list request.' })
  async listRoots(_args: unknown, ctx: ToolContext): Promise<string> {
    const answer = await ctx.input.listRoots({ key: 'client_roots' });
    return `Client roots: ${answer.roots.map((r) => r.uri).join(', ') || '(none)'}`;
  }

  @McpTool({
    name: 'test_input_required_result_request_state',
    description: 'MRTR: elicitation plus requestState.',
  })
  async requestState(_args: unknown, ctx: ToolContext): Promise<string> {
    const answer = await ctx.input.elicit(CONFIRM_QUESTION, { key: 'confirm' });
    // Reaching this line means the edge verified the echoed requestState that carried the earlier round.
    return `state-ok: ${describeElicitation(answer)}`;
  }

  @McpTool({
    name: 'test_input_required_result_multiple_inputs',
    description: 'MRTR: elicitation, sampling and roots in one round.',
  })
  async multipleInputs(_args: unknown, ctx: ToolContext): Promise<string> {
    const [name, greeting, roots] = await Promise.all([
      ctx.input.elicit(NAME_QUESTION, { key: 'user_name' }),
      ctx.input.sample(sampling('Generate a greeting', 50), { key: 'greeting' }),
      ctx.input.listRoots({ key: 'client_roots' }),
    ]);
    return `All inputs received: name=${answerField(name, 'name')}, greeting=${sampledText(greeting)}, roots=${roots.roots.length}`;
  }

  @McpTool({ name: 'test_input_required_result_multi_round', description: 'MRTR: two elicitation rounds.' })
  async multiRound(_args: unknown, ctx: ToolContext): Promise<string> {
    const step1 = await ctx.input.elicit(
      {
        message: 'Step 1: What is your name?',
        requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
      },
      { key: 'step1' },
    );
    const step2 = await ctx.input.elicit(
      {
        message: 'Step 2: What is your favorite color?',
        requestedSchema: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] },
      },
      { key: 'step2' },
    );
    return `Multi-round complete: name=${answerField(step1, 'name')}, color=${answerField(step2, 'color')}`;
  }

  @McpTool({
    name: 'test_input_required_result_tampered_state',
    description: 'MRTR: the edge must refuse a tampered requestState.',
  })
  async tamperedState(_args: unknown, ctx: ToolContext): Promise<string> {
    const answer = await ctx.input.elicit(CONFIRM_QUESTION, { key: 'confirm' });
    return `state-ok: ${describeElicitation(answer)}`;
  }

  @McpTool({
    name: 'test_input_required_result_capabilities',
    description: 'MRTR: asks only for the kinds of input the client declared.',
  })
  async capabilities(_args: unknown, ctx: ToolContext): Promise<string> {
    const declared: JsonObject = ctx.clientCapabilities ?? {};
    const asks: Promise<string>[] = [];
    if (declared.elicitation !== undefined) {
      asks.push(ctx.input.elicit(NAME_QUESTION, { key: 'user_name' }).then((a) => `elicitation ${a.action}`));
    }
    if (declared.sampling !== undefined) {
      asks.push(
        ctx.input
          .sample(sampling('Say hello', 20), { key: 'greeting' })
          .then((a) => `sampling ${sampledText(a)}`),
      );
    }
    if (declared.roots !== undefined) {
      asks.push(ctx.input.listRoots({ key: 'client_roots' }).then((a) => `roots ${a.roots.length}`));
    }
    const answers = await Promise.all(asks);
    return `capabilities-ok: ${answers.join('; ') || 'no input capabilities declared'}`;
  }

  @McpPrompt({
    name: 'test_input_required_result_prompt',
    description: 'MRTR on prompts/get: asks for context first.',
  })
  async prompt(_args: unknown, ctx: ToolContext): Promise<PromptMessage[]> {
    const answer = await ctx.input.elicit(
      {
        message: 'What context should the prompt use?',
        requestedSchema: {
          type: 'object',
          properties: { context: { type: 'string' } },
          required: ['context'],
        },
      },
      { key: 'user_context' },
    );
    return [
      {
        role: 'user',
        content: { type: 'text', text: `Use this context: ${answerField(answer, 'context')}` },
      },
    ];
  }
}
