import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { McpTool, type CallToolResult, type ToolContext } from '../../tool-dispatch/index.js';
import { PNG_1X1_BASE64, WAV_SILENCE_BASE64 } from './fixture-media.js';
import { describeElicitation, sampledText } from './fixture-text.js';
import { MessageInput } from './inputs/message.input.js';
import { PromptInput } from './inputs/prompt.input.js';
import { JSON_SCHEMA_2020_12_INPUT } from './json-schema-2020-12.fixture.js';

const STEP_MS = 50;

/** The tools of the conformance suite's core fixture (conformance.md §2.1), built on the public API only. */
@Injectable()
export class CoreToolsService {
  @McpTool({ name: 'test_simple_text', description: 'Returns a simple text response.' })
  simpleText(): string {
    return 'This is a simple text response for testing.';
  }

  @McpTool({
    name: 'test_reconnection',
    description: 'Closes its SSE stream mid-call; the result arrives on the resumed stream (SSE polling).',
  })
  async reconnection(_args: unknown, ctx: ToolContext): Promise<string> {
    await ctx.closeSseStream?.();
    await sleep(100, undefined, { signal: ctx.signal });
    return 'Reconnection test completed';
  }

  @McpTool({
    name: 'test_custom_headers',
    description: 'Echoes arguments that clients mirror into Mcp-Param-* headers (SEP-2243).',
    input: {
      type: 'object',
      properties: {
        region: { type: 'string', description: 'Mirrored in Mcp-Param-Region', 'x-mcp-header': 'Region' },
        priority: {
          type: 'integer',
          description: 'Mirrored in Mcp-Param-Priority',
          'x-mcp-header': 'Priority',
        },
      },
      required: ['region'],
    },
  })
  customHeaders(args: { region: string; priority?: number }): string {
    return `region=${args.region} priority=${args.priority ?? 'unset'}`;
  }

  @McpTool({ name: 'test_image_content', description: 'Returns a 1x1 PNG image.' })
  imageContent(): CallToolResult {
    return { content: [{ type: 'image', data: PNG_1X1_BASE64, mimeType: 'image/png' }] };
  }

  @McpTool({ name: 'test_audio_content', description: 'Returns a short WAV clip.' })
  audioContent(): CallToolResult {
    return { content: [{ type: 'audio', data: WAV_SILENCE_BASE64, mimeType: 'audio/wav' }] };
  }

  @McpTool({ name: 'test_embedded_resource', description: 'Returns an embedded text resource.' })
  embeddedResource(): CallToolResult {
    return {
      content: [
        {
          type: 'resource',
          resource: {
            uri: 'test://embedded-resource',
            mimeType: 'text/plain',
            text: 'This is an embedded resource content.',
          },
        },
      ],
    };
  }

  @McpTool({ name: 'test_multiple_content_types', description: 'Returns text, an image and a resource.' })
  multipleContentTypes(): CallToolResult {
    return {
      content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: PNG_1X1_BASE64, mimeType: 'image/png' },
        {
          type: 'resource',
          resource: {
            uri: 'test://mixed-content-resource',
            mimeType: 'application/json',
            text: JSON.stringify({ test: 'data', value: 123 }),
          },
        },
      ],
    };
  }

  @McpTool({ name: 'test_tool_with_logging', description: 'Sends three info log messages while it runs.' })
  async toolWithLogging(_args: unknown, ctx: ToolContext): Promise<string> {
    await ctx.log('info', 'Tool execution started');
    await sleep(STEP_MS, undefined, { signal: ctx.signal });
    await ctx.log('info', 'Tool processing data');
    await sleep(STEP_MS, undefined, { signal: ctx.signal });
    await ctx.log('info', 'Tool execution completed');
    return 'Logging test completed';
  }

  @McpTool({ name: 'test_error_handling', description: 'Always fails with a tool error.' })
  errorHandling(): never {
    throw new Error('This tool intentionally returns an error for testing');
  }

  @McpTool({ name: 'test_tool_with_progress', description: 'Reports progress 0, 50 and 100 of 100.' })
  async toolWithProgress(_args: unknown, ctx: ToolContext): Promise<string> {
    for (const [i, progress] of [0, 50, 100].entries()) {
      if (i > 0) await sleep(STEP_MS, undefined, { signal: ctx.signal });
      await ctx.progress({ progress, total: 100 });
    }
    return 'Progress test completed';
  }

  @McpTool({
    name: 'test_sampling',
    description: 'Asks the client LLM to answer a prompt.',
    input: PromptInput,
  })
  async sampling(args: PromptInput, ctx: ToolContext): Promise<string> {
    const result = await ctx.input.sample({
      messages: [{ role: 'user', content: { type: 'text', text: args.prompt } }],
      maxTokens: 100,
    });
    return `LLM response: ${sampledText(result)}`;
  }

  @McpTool({
    name: 'test_elicitation',
    description: 'Asks the user for a username and email.',
    input: MessageInput,
  })
  async elicitation(args: MessageInput, ctx: ToolContext): Promise<string> {
    const result = await ctx.input.elicit({
      message: args.message,
      requestedSchema: {
        type: 'object',
        properties: {
          username: { type: 'string', description: "User's response" },
          email: { type: 'string', description: "User's email address" },
        },
        required: ['username', 'email'],
      },
    });
    return `User response: ${describeElicitation(result)}`;
  }

  @McpTool({
    name: 'test_elicitation_sep1034_defaults',
    description: 'Elicits a form whose fields have defaults.',
  })
  async elicitationDefaults(_args: unknown, ctx: ToolContext): Promise<string> {
    const result = await ctx.input.elicit({
      message: 'Please review and update the form fields with defaults',
      requestedSchema: {
        type: 'object',
        properties: {
          name: { type: 'string', description: 'User name', default: 'John Doe' },
          age: { type: 'integer', description: 'User age', default: 30 },
          score: { type: 'number', description: 'User score', default: 95.5 },
          status: {
            type: 'string',
            description: 'User status',
            enum: ['active', 'inactive', 'pending'],
            default: 'active',
          },
          verified: { type: 'boolean', description: 'Verification status', default: true },
        },
        required: [],
      },
    });
    return `Elicitation completed: ${describeElicitation(result)}`;
  }

  @McpTool({
    name: 'test_elicitation_sep1330_enums',
    description: 'Elicits a form using all five enum forms.',
  })
  async elicitationEnums(_args: unknown, ctx: ToolContext): Promise<string> {
    const result = await ctx.input.elicit({
      message: 'Please select options from the enum fields',
      requestedSchema: {
        type: 'object',
        properties: {
          untitledSingle: {
            type: 'string',
            description: 'Select one option',
            enum: ['option1', 'option2', 'option3'],
          },
          titledSingle: {
            type: 'string',
            description: 'Select one option with titles',
            oneOf: [
              { const: 'value1', title: 'First Option' },
              { const: 'value2', title: 'Second Option' },
              { const: 'value3', title: 'Third Option' },
            ],
          },
          legacyEnum: {
            type: 'string',
            description: 'Select one option (legacy)',
            enum: ['opt1', 'opt2', 'opt3'],
            enumNames: ['Option One', 'Option Two', 'Option Three'],
          },
          untitledMulti: {
            type: 'array',
            description: 'Select multiple options',
            items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
          },
          titledMulti: {
            type: 'array',
            description: 'Select multiple options with titles',
            items: {
              anyOf: [
                { const: 'value1', title: 'First Choice' },
                { const: 'value2', title: 'Second Choice' },
                { const: 'value3', title: 'Third Choice' },
              ],
            },
          },
        },
        required: [],
      },
    });
    return `Elicitation completed: ${describeElicitation(result)}`;
  }

  @McpTool({
    name: 'json_schema_2020_12_tool',
    description: 'Tool with JSON Schema 2020-12 features',
    input: JSON_SCHEMA_2020_12_INPUT,
  })
  jsonSchema202012(args: Record<string, unknown>): string {
    return `Received: ${JSON.stringify(args)}`;
  }
}
