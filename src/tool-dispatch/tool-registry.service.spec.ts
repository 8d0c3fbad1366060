import 'reflect-metadata';
import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { IsIn, IsInt, IsOptional, IsString, Min } from 'class-validator';
import { RecordingToolContext } from '../../test/support/recording-tool-context.js';
import {
  bootToolRegistry,
  bootToolRegistryFailure as bootFailure,
} from '../../test/support/tool-registry-context.js';
import type { Principal } from '../principals/principal.js';
import {
  Describe,
  McpCompletion,
  McpControlSignal,
  McpPrompt,
  McpProtocolError,
  McpResource,
  McpTool,
  ToolDispatchError,
  ToolDispatchErrorCode,
  type ResourceRequest,
  type ToolContext,
} from './index.js';
import { ToolRegistry } from './tool-registry.service.js';

class CountInput {
  @IsInt()
  @Min(1)
  @Describe('How many')
  count: number;

  @IsOptional()
  @IsString()
  label?: string;
}

class GreetingArgs {
  @IsString()
  @Describe('Who to greet')
  name: string;

  @IsOptional()
  @IsIn(['formal', 'casual'])
  tone?: string;
}

class InputRequired extends McpControlSignal {}

const RAW = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: { n: { type: 'integer' } },
  required: ['n'],
  additionalProperties: false,
};

@Injectable()
class SampleTools {
  @McpTool({ name: 'zeta.count', description: 'Counts', input: CountInput, scopes: ['count:run'] })
  count(args: CountInput) {
    return `${args.constructor.name}:${args.count}:${args.label ?? '-'}`;
  }

  @McpTool({
    name: 'alpha_raw',
    title: 'Raw',
    description: 'Raw schema',
    input: RAW,
    taskSupport: 'optional',
  })
  raw(args: { n: number }) {
    return { content: [{ type: 'text', text: `n=${args.n}` }] };
  }

  @McpTool({
    name: 'structured',
    description: 'Structured output',
    output: { type: 'object', properties: { total: { type: 'integer' } }, required: ['total'] },
  })
  structured(): unknown {
    return { total: 3 };
  }

  @McpTool({
    name: 'bad_output',
    description: 'Breaks its output schema',
    output: { type: 'object', properties: { total: { type: 'integer' } }, required: ['total'] },
  })
  badOutput(): unknown {
    return { total: 'three' };
  }

  @McpTool({ name: 'fails', description: 'Throws a plain error' })
  fails(): never {
    throw new Error('disk is full');
  }

  @McpTool({ name: 'protocol', description: 'Throws a protocol error' })
  protocol(): never {
    throw new McpProtocolError(-32042, 'nope', { why: 'test' });
  }

  @McpTool({ name: 'control', description: 'Raises a control signal' })
  control(): never {
    throw new InputRequired('input required');
  }

  @McpTool({ name: 'cancellable', description: 'Fails after the caller aborted' })
  cancellable(_args: unknown, ctx: ToolContext): never {
    (ctx as RecordingToolContext).controller.abort();
    throw new Error('aborted while working');
  }

  @McpTool({ name: 'plain_object', description: 'Returns JSON without an output schema' })
  plainObject(): unknown {
    return { a: 1 };
  }

  @McpResource({ uri: 'mem://static', name: 'static', description: 'Static', mimeType: 'text/markdown' })
  staticResource() {
    return '# hi';
  }

  @McpResource({
    uriTemplate: 'mem://items/{id}',
    name: 'item',
    description: 'An item',
    mimeType: 'application/json',
  })
  item({ uri, params }: ResourceRequest) {
    if (params.id === 'missing') {
      throw new ToolDispatchError(ToolDispatchErrorCode.RESOURCE_NOT_FOUND, `No item ${params.id}`, { uri });
    }
    return JSON.stringify({ id: params.id });
  }

  @McpResource({ uriTemplate: 'mem://items/{id}/raw', name: 'item-raw', description: 'Raw bytes' })
  itemRaw() {
    return Buffer.from('AB');
  }

  @McpPrompt({ name: 'greet', description: 'Greets', arguments: GreetingArgs })
  greet(args: GreetingArgs) {
    return `Hello ${args.name} (${args.tone ?? 'casual'})`;
  }

  @McpPrompt({
    name: 'pair',
    description: 'Two args',
    arguments: [{ name: 'a', required: true }, { name: 'b', required: true }, { name: 'c' }],
  })
  pair(args: Record<string, string>) {
    return [{ role: 'user' as const, content: { type: 'text' as const, text: `${args.a}+${args.b}` } }];
  }

  @McpCompletion({ ref: { type: 'ref/prompt', name: 'greet' } })
  completeGreet(argument: { name: string; value: string }) {
    return ['Ada', 'Alan', 'Grace'].filter((n) => argument.name === 'name' && n.startsWith(argument.value));
  }

  @McpCompletion({ ref: { type: 'ref/resource', uri: 'mem://items/{id}' } })
  completeItem() {
    return Array.from({ length: 150 }, (_, i) => `item-${i}`);
  }
}

@Module({ providers: [SampleTools] })
class SampleToolsModule {}

function principal(scopes: string[]): Principal {
  return { id: 'oidc:x', provider: 'oidc', subject: 'x', scopes, groups: [] };
}

describe('ToolRegistry', () => {
  let app: INestApplicationContext;
  let registry: ToolRegistry;
  beforeAll(async () => {
    ({ app, registry } = await bootToolRegistry(SampleToolsModule));
  });
  afterAll(async () => {
    await app.close();
  });

  describe('tools/list', () => {
    it('lists every tool in registration order with derived or verbatim schemas and server-side fields', () => {
      const tools = registry.listTools();
      const expected = [
        'zeta.count',
        'alpha_raw',
        'structured',
        'bad_output',
        'fails',
        'protocol',
        'control',
        'cancellable',
        'plain_object',
      ];
      expect(tools.map((t) => t.name)).toEqual(expected);
      // Deterministic: the same order on every call.
      expect(registry.listTools().map((t) => t.name)).toEqual(expected);
      const raw = registry.getTool('alpha_raw')!;
      expect(raw.inputSchema).toEqual(RAW);
      expect(raw).toMatchObject({ title: 'Raw', taskSupport: 'optional', scopes: [] });
      const count = registry.getTool('zeta.count')!;
      expect(count.taskSupport).toBe('forbidden');
      expect(count.scopes).toEqual(['count:run']);
      expect(count.inputSchema).toEqual({
        type: 'object',
        properties: {
          count: { type: 'integer', minimum: 1, description: 'How many' },
          label: { type: 'string' },
        },
        required: ['count'],
        additionalProperties: false,
      });
      expect(registry.getTool('fails')!.inputSchema).toEqual({
        type: 'object',
        properties: {},
        additionalProperties: false,
      });
      expect(registry.getTool('structured')!.outputSchema).toMatchObject({ required: ['total'] });
    });

    it('filters by scope for a principal, but not for the anonymous development principal', () => {
      expect(registry.listTools(principal([])).map((t) => t.name)).not.toContain('zeta.count');
      expect(registry.listTools(principal(['count:run'])).map((t) => t.name)).toContain('zeta.count');
      expect(registry.listTools(new RecordingToolContext().principal).map((t) => t.name)).toContain(
        'zeta.count',
      );
    });
  });

  describe('tools/call', () => {
    it('passes a validated DTO instance to the handler and wraps a string in one text item', async () => {
      const result = await registry.callTool('zeta.count', { count: 2 }, new RecordingToolContext());
      expect(result).toEqual({ content: [{ type: 'text', text: 'CountInput:2:-' }] });
    });

    it('refuses unknown tools and missing scopes with domain errors', async () => {
      await expect(registry.callTool('nope', {}, new RecordingToolContext())).rejects.toMatchObject({
        code: ToolDispatchErrorCode.TOOL_NOT_FOUND,
        data: { name: 'nope' },
      });
      await expect(
        registry.callTool(
          'zeta.count',
          { count: 1 },
          new RecordingToolContext({}, { principal: principal(['other']) }),
        ),
      ).rejects.toMatchObject({
        code: ToolDispatchErrorCode.INSUFFICIENT_SCOPE,
        data: { requiredScopes: ['count:run'] },
      });
    });

    it('refuses invalid arguments naming every bad field, for DTO and raw schemas alike', async () => {
      const ctx = new RecordingToolContext();
      const dto = await registry
        .callTool('zeta.count', { count: 0.5, label: 7, extra: true }, ctx)
        .catch((e: unknown) => e);
      expect(dto).toBeInstanceOf(ToolDispatchError);
      expect((dto as ToolDispatchError).code).toBe(ToolDispatchErrorCode.INVALID_ARGUMENTS);
      expect((dto as ToolDispatchError).message).toContain('arguments.count must be an integer number');
      expect((dto as ToolDispatchError).data!.problems).toEqual(
        expect.arrayContaining([
          'arguments.count must be an integer number',
          'arguments.label must be a string',
          'arguments.extra is not allowed (unknown property)',
        ]),
      );
      const raw = (await registry
        .callTool('alpha_raw', { n: 'x' }, ctx)
        .catch((e: unknown) => e)) as ToolDispatchError;
      expect(raw.code).toBe(ToolDispatchErrorCode.INVALID_ARGUMENTS);
      expect(raw.data!.problems).toEqual(['arguments.n must be an integer']);
      const none = (await registry
        .callTool('fails', { x: 1 }, ctx)
        .catch((e: unknown) => e)) as ToolDispatchError;
      expect(none.data!.problems).toEqual(['arguments.x is not allowed (this tool takes no arguments)']);
    });

    it('returns a content result as is', async () => {
      expect(await registry.callTool('alpha_raw', { n: 4 }, new RecordingToolContext())).toEqual({
        content: [{ type: 'text', text: 'n=4' }],
      });
    });

    it('turns structured output into structuredContent plus a JSON text copy, and refuses a result breaking it', async () => {
      expect(await registry.callTool('structured', {}, new RecordingToolContext())).toEqual({
        content: [{ type: 'text', text: '{"total":3}' }],
        structuredContent: { total: 3 },
      });
      await expect(registry.callTool('bad_output', {}, new RecordingToolContext())).rejects.toMatchObject({
        code: ToolDispatchErrorCode.INVALID_RESULT,
        data: { problems: ['structuredContent.total must be an integer'] },
      });
    });

    it('serialises a plain object as JSON text when there is no output schema', async () => {
      expect(await registry.callTool('plain_object', undefined, new RecordingToolContext())).toEqual({
        content: [{ type: 'text', text: '{"a":1}' }],
      });
    });

    it('turns a plain Error into an isError result carrying only the message', async () => {
      const result = await registry.callTool('fails', {}, new RecordingToolContext());
      expect(result).toEqual({ content: [{ type: 'text', text: 'disk is full' }], isError: true });
      expect(JSON.stringify(result)).not.toContain('at ');
    });

    it('propagates McpProtocolError, McpControlSignal and errors after abort', async () => {
      const protocol = await registry
        .callTool('protocol', {}, new RecordingToolContext())
        .catch((e: unknown) => e);
      expect(protocol).toBeInstanceOf(McpProtocolError);
      expect(protocol).toMatchObject({ code: -32042, data: { why: 'test' } });
      await expect(registry.callTool('control', {}, new RecordingToolContext())).rejects.toBeInstanceOf(
        InputRequired,
      );
      await expect(registry.callTool('cancellable', {}, new RecordingToolContext())).rejects.toThrow(
        'aborted while working',
      );
    });
  });

  describe('resources', () => {
    it('lists fixed resources and templates separately, sorted', () => {
      expect(registry.listResources()).toEqual([
        { uri: 'mem://static', name: 'static', description: 'Static', mimeType: 'text/markdown' },
      ]);
      expect(registry.listResourceTemplates().map((t) => t.uriTemplate)).toEqual([
        'mem://items/{id}',
        'mem://items/{id}/raw',
      ]);
    });

    it('reads fixed resources and matches templates, decoding variables', async () => {
      const ctx = new RecordingToolContext();
      expect(await registry.readResource('mem://static', ctx)).toEqual({
        contents: [{ uri: 'mem://static', mimeType: 'text/markdown', text: '# hi' }],
      });
      expect(await registry.readResource('mem://items/a%20b', ctx)).toEqual({
        contents: [{ uri: 'mem://items/a%20b', mimeType: 'application/json', text: '{"id":"a b"}' }],
      });
      expect(await registry.readResource('mem://items/7/raw', ctx)).toEqual({
        contents: [{ uri: 'mem://items/7/raw', mimeType: 'application/octet-stream', blob: 'QUI=' }],
      });
    });

    it('answers RESOURCE_NOT_FOUND carrying the uri, from the registry or from a handler', async () => {
      const ctx = new RecordingToolContext();
      for (const uri of ['mem://nothing', 'mem://items/1/2/3', 'mem://items/missing']) {
        await expect(registry.readResource(uri, ctx)).rejects.toMatchObject({
          code: ToolDispatchErrorCode.RESOURCE_NOT_FOUND,
          data: { uri },
        });
      }
    });
  });

  describe('prompts and completion', () => {
    it('lists prompts with arguments derived from a DTO or given as a list', () => {
      expect(registry.listPrompts()).toEqual([
        {
          name: 'greet',
          description: 'Greets',
          arguments: [
            { name: 'name', description: 'Who to greet', required: true },
            { name: 'tone', required: false },
          ],
        },
        {
          name: 'pair',
          description: 'Two args',
          arguments: [{ name: 'a', required: true }, { name: 'b', required: true }, { name: 'c' }],
        },
      ]);
    });

    it('renders prompts from strings and message lists', async () => {
      const ctx = new RecordingToolContext();
      expect(await registry.getPrompt('greet', { name: 'Ada', tone: 'formal' }, ctx)).toEqual({
        description: 'Greets',
        messages: [{ role: 'user', content: { type: 'text', text: 'Hello Ada (formal)' } }],
      });
      expect((await registry.getPrompt('pair', { a: '1', b: '2' }, ctx)).messages[0].content).toEqual({
        type: 'text',
        text: '1+2',
      });
    });

    it('names missing, unknown and invalid prompt arguments and unknown prompts', async () => {
      const ctx = new RecordingToolContext();
      await expect(registry.getPrompt('pair', { a: '1', d: 'x' }, ctx)).rejects.toMatchObject({
        code: ToolDispatchErrorCode.INVALID_ARGUMENTS,
        data: { problems: ['arguments.b is required', 'arguments.d is not allowed (unknown argument)'] },
      });
      await expect(registry.getPrompt('greet', { tone: 'rude' }, ctx)).rejects.toMatchObject({
        code: ToolDispatchErrorCode.INVALID_ARGUMENTS,
        data: {
          problems: [
            'arguments.name is required',
            'arguments.tone must be one of the following values: formal, casual',
          ],
        },
      });
      await expect(registry.getPrompt('nope', {}, ctx)).rejects.toMatchObject({
        code: ToolDispatchErrorCode.PROMPT_NOT_FOUND,
      });
    });

    it('completes prompt arguments and caps values at 100 with hasMore and total', async () => {
      expect(
        await registry.complete({ type: 'ref/prompt', name: 'greet' }, { name: 'name', value: 'A' }),
      ).toEqual({
        values: ['Ada', 'Alan'],
      });
      const many = await registry.complete(
        { type: 'ref/resource', uri: 'mem://items/{id}' },
        { name: 'id', value: '' },
      );
      expect(many.values).toHaveLength(100);
      expect(many).toMatchObject({ total: 150, hasMore: true });
      expect(await registry.complete({ type: 'ref/prompt', name: 'pair' }, { name: 'a', value: '' })).toEqual(
        {
          values: [],
        },
      );
      await expect(
        registry.complete({ type: 'ref/prompt', name: 'nope' }, { name: 'a', value: '' }),
      ).rejects.toMatchObject({ code: ToolDispatchErrorCode.PROMPT_NOT_FOUND });
      await expect(
        registry.complete({ type: 'ref/resource', uri: 'mem://x/{y}' }, { name: 'y', value: '' }),
      ).rejects.toMatchObject({
        code: ToolDispatchErrorCode.RESOURCE_NOT_FOUND,
        data: { uri: 'mem://x/{y}' },
      });
    });
  });

  describe('startup checks', () => {
    it('fails module init when two providers declare the same tool name, naming both', async () => {
      @Injectable()
      class FirstTeam {
        @McpTool({ name: 'shared', description: 'one' })
        run() {
          return 'a';
        }
      }
      @Injectable()
      class SecondTeam {
        @McpTool({ name: 'shared', description: 'two' })
        go() {
          return 'b';
        }
      }
      @Module({ providers: [FirstTeam] })
      class FirstModule {}
      @Module({ providers: [SecondTeam] })
      class SecondModule {}
      const err = await bootFailure(FirstModule, SecondModule);
      expect(err).toBeInstanceOf(ToolDispatchError);
      expect(err.message).toMatch(
        /SecondTeam\.go: tool shared is already declared by FirstTeam\.run|FirstTeam\.run: tool shared is already declared by SecondTeam\.go/,
      );
    });

    it('fails on a bad tool name, a broken raw schema, a dangling completion and a duplicate template', async () => {
      @Injectable()
      class Broken {
        @McpTool({ name: 'has space', description: 'bad name' })
        badName() {
          return '';
        }

        @McpTool({
          name: 'bad_schema',
          description: 'bad schema',
          input: { type: 'object', properties: { a: { type: 'nope' } } },
        })
        badSchema() {
          return '';
        }

        @McpCompletion({ ref: { type: 'ref/prompt', name: 'ghost' } })
        dangling() {
          return [];
        }

        @McpResource({ uriTemplate: 'x://{a}', name: 'a', description: 'a' })
        first() {
          return '';
        }

        @McpResource({ uriTemplate: 'x://{a}', name: 'b', description: 'b' })
        second() {
          return '';
        }
      }
      @Module({ providers: [Broken] })
      class BrokenModule {}
      const err = await bootFailure(BrokenModule);
      expect(err.message).toContain('Broken.badName (@McpTool): tool name "has space" must match');
      expect(err.message).toContain(
        'Broken.badSchema (@McpTool): input of tool bad_schema: invalid JSON Schema',
      );
      expect(err.message).toContain(
        'Broken.dangling (@McpCompletion): ref {"type":"ref/prompt","name":"ghost"}',
      );
      expect(err.message).toContain(
        'Broken.second: resource template x://{a} is already declared by Broken.first',
      );
    });
  });
});
