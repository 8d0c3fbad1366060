import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { RecordingToolContext } from '../../../test/support/recording-tool-context.js';
import { bootToolRegistry } from '../../../test/support/tool-registry-context.js';
import { McpProtocolError, type ElicitResult } from '../../tool-dispatch/index.js';
import type { ToolRegistry } from '../../tool-dispatch/tool-registry.service.js';
import { ConformanceModule } from './conformance.module.js';
import { JSON_SCHEMA_2020_12_INPUT } from './json-schema-2020-12.fixture.js';

const accept = (content: Record<string, unknown>): ElicitResult => ({ action: 'accept', content });

describe('ConformanceModule fixtures through the registry', () => {
  let app: INestApplicationContext;
  let registry: ToolRegistry;
  beforeAll(async () => {
    ({ app, registry } = await bootToolRegistry(ConformanceModule));
  });
  afterAll(async () => {
    await app.close();
  });

  it('answers the content fixtures with the expected shapes and valid media', async () => {
    const ctx = new RecordingToolContext();
    expect(await registry.callTool('test_simple_text', {}, ctx)).toEqual({
      content: [{ type: 'text', text: 'This is a simple text response for testing.' }],
    });
    const image = await registry.callTool('test_image_content', {}, ctx);
    const png = image.content[0] as { type: string; data: string; mimeType: string };
    expect(png).toMatchObject({ type: 'image', mimeType: 'image/png' });
    expect(Buffer.from(png.data, 'base64').subarray(1, 4).toString()).toBe('PNG');
    const audio = await registry.callTool('test_audio_content', {}, ctx);
    const wav = Buffer.from((audio.content[0] as { data: string }).data, 'base64');
    expect(wav.subarray(0, 4).toString()).toBe('RIFF');
    expect(wav.subarray(8, 12).toString()).toBe('WAVE');
    const mixed = await registry.callTool('test_multiple_content_types', {}, ctx);
    expect(mixed.content.map((c) => c.type)).toEqual(['text', 'image', 'resource']);
    expect(mixed.content[2]).toMatchObject({ resource: { text: '{"test":"data","value":123}' } });
  });

  it('reports the intentional error as a tool error result', async () => {
    expect(await registry.callTool('test_error_handling', {}, new RecordingToolContext())).toEqual({
      content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }],
      isError: true,
    });
  });

  it('logs three info messages and reports progress 0, 50, 100 of 100, about 50 ms apart', async () => {
    const ctx = new RecordingToolContext();
    await registry.callTool('test_tool_with_logging', {}, ctx);
    expect(ctx.logs.map((l) => [l.level, l.data])).toEqual([
      ['info', 'Tool execution started'],
      ['info', 'Tool processing data'],
      ['info', 'Tool execution completed'],
    ]);
    expect(ctx.logs[2].at - ctx.logs[0].at).toBeGreaterThanOrEqual(90);
    await registry.callTool('test_tool_with_progress', {}, ctx);
    expect(ctx.progressUpdates).toEqual([
      { progress: 0, total: 100 },
      { progress: 50, total: 100 },
      { progress: 100, total: 100 },
    ]);
  });

  it('samples and elicits through ctx.input', async () => {
    const ctx = new RecordingToolContext({
      sample: () => ({ role: 'assistant', content: { type: 'text', text: 'Paris' } }),
      elicit: () => accept({ username: 'ada', email: 'ada@example.test' }),
    });
    expect(await registry.callTool('test_sampling', { prompt: 'Capital?' }, ctx)).toEqual({
      content: [{ type: 'text', text: 'LLM response: Paris' }],
    });
    expect(ctx.inputs[0]).toEqual({
      method: 'sampling/createMessage',
      params: { messages: [{ role: 'user', content: { type: 'text', text: 'Capital?' } }], maxTokens: 100 },
    });
    const elicited = await registry.callTool('test_elicitation', { message: 'Who are you?' }, ctx);
    expect(elicited.content[0]).toMatchObject({ text: expect.stringContaining('"username":"ada"') });
    await registry.callTool('test_elicitation_sep1034_defaults', {}, ctx);
    const defaults = ctx.inputs[2].params.requestedSchema as {
      properties: Record<string, { default: unknown }>;
    };
    expect(Object.fromEntries(Object.entries(defaults.properties).map(([k, v]) => [k, v.default]))).toEqual({
      name: 'John Doe',
      age: 30,
      score: 95.5,
      status: 'active',
      verified: true,
    });
    await expect(registry.callTool('test_sampling', {}, ctx)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENTS',
      data: { problems: ['arguments.prompt is required'] },
    });
  });

  it('emits the 2020-12 schema verbatim and validates against it', async () => {
    expect(registry.getTool('json_schema_2020_12_tool')!.inputSchema).toEqual(JSON_SCHEMA_2020_12_INPUT);
    const ctx = new RecordingToolContext();
    await expect(
      registry.callTool('json_schema_2020_12_tool', { contactMethod: 'phone', email: 'a@b' }, ctx),
    ).rejects.toMatchObject({ data: { problems: expect.arrayContaining(['arguments.phone is required']) } });
    const ok = await registry.callTool(
      'json_schema_2020_12_tool',
      { contactMethod: 'phone', phone: '1' },
      ctx,
    );
    expect(ok.isError).toBeUndefined();
  });

  it('serves the fixture resources, template and prompts', async () => {
    const ctx = new RecordingToolContext();
    expect(await registry.readResource('test://static-text', ctx)).toEqual({
      contents: [
        {
          uri: 'test://static-text',
          mimeType: 'text/plain',
          text: 'This is the content of the static text resource.',
        },
      ],
    });
    expect((await registry.readResource('test://static-binary', ctx)).contents[0]).toMatchObject({
      uri: 'test://static-binary',
      mimeType: 'image/png',
      blob: expect.any(String),
    });
    expect(await registry.readResource('test://template/123/data', ctx)).toEqual({
      contents: [
        {
          uri: 'test://template/123/data',
          mimeType: 'application/json',
          text: '{"id":"123","templateTest":true,"data":"Data for ID: 123"}',
        },
      ],
    });
    await expect(
      registry.readResource('test://nonexistent-resource-for-conformance-testing', ctx),
    ).rejects.toMatchObject({
      code: 'RESOURCE_NOT_FOUND',
      data: { uri: 'test://nonexistent-resource-for-conformance-testing' },
    });
    const withArgs = await registry.getPrompt(
      'test_prompt_with_arguments',
      { arg1: 'hello', arg2: 'world' },
      ctx,
    );
    expect(withArgs.messages[0].content).toEqual({
      type: 'text',
      text: "Prompt with arguments: arg1='hello', arg2='world'",
    });
    await expect(registry.getPrompt('test_prompt_with_arguments', { arg1: 'x' }, ctx)).rejects.toMatchObject({
      data: { problems: ['arguments.arg2 is required'] },
    });
    const embedded = await registry.getPrompt(
      'test_prompt_with_embedded_resource',
      { resourceUri: 'test://x' },
      ctx,
    );
    expect(embedded.messages[0].content).toMatchObject({ type: 'resource', resource: { uri: 'test://x' } });
    expect(
      await registry.complete(
        { type: 'ref/prompt', name: 'test_prompt_with_arguments' },
        { name: 'arg1', value: 'par' },
      ),
    ).toEqual({ values: ['paris', 'park', 'party'] });
  });

  it('asks for MRTR input under the keys the scenarios expect', async () => {
    const ctx = new RecordingToolContext({
      elicit: () => accept({ name: 'Alice' }),
      sample: () => ({ role: 'assistant', content: { type: 'text', text: 'Hi' } }),
      roots: () => ({ roots: [{ uri: 'file:///projects/demo' }] }),
    });
    expect(await registry.callTool('test_input_required_result_elicitation', {}, ctx)).toEqual({
      content: [{ type: 'text', text: 'Hello, Alice!' }],
    });
    await registry.callTool('test_input_required_result_multiple_inputs', {}, ctx);
    expect(ctx.inputs.slice(1).map((i) => [i.method, i.key])).toEqual([
      ['elicitation/create', 'user_name'],
      ['sampling/createMessage', 'greeting'],
      ['roots/list', 'client_roots'],
    ]);
    const state = await registry.callTool('test_input_required_result_request_state', {}, ctx);
    expect(state.content[0]).toMatchObject({ text: expect.stringContaining('state-ok') });
    const prompt = await registry.getPrompt('test_input_required_result_prompt', {}, ctx);
    expect(ctx.inputs.at(-1)).toMatchObject({ method: 'elicitation/create', key: 'user_context' });
    expect(prompt.messages).toHaveLength(1);
  });

  it('asks only for the input kinds the client declared', async () => {
    const ctx = new RecordingToolContext(
      { sample: () => ({ role: 'assistant', content: { type: 'text', text: 'Hello' } }) },
      { clientCapabilities: { sampling: {} } },
    );
    const result = await registry.callTool('test_input_required_result_capabilities', {}, ctx);
    expect(ctx.inputs.map((i) => i.method)).toEqual(['sampling/createMessage']);
    expect(result.content[0]).toMatchObject({ text: 'capabilities-ok: sampling Hello' });
  });

  it('declares the task fixtures with their task support and runs them', async () => {
    expect(
      [
        'greet',
        'slow_compute',
        'failing_job',
        'protocol_error_job',
        'confirm_delete',
        'multi_input',
        'test_tool_with_task',
      ].map((n) => [n, registry.getTool(n)!.taskSupport]),
    ).toEqual([
      ['greet', 'forbidden'],
      ['slow_compute', 'optional'],
      ['failing_job', 'required'],
      ['protocol_error_job', 'optional'],
      ['confirm_delete', 'optional'],
      ['multi_input', 'optional'],
      ['test_tool_with_task', 'required'],
    ]);
    const ctx = new RecordingToolContext({
      elicit: (p) =>
        accept(
          p.message.includes('first') ? { first_name: 'Ada' } : { last_name: 'Lovelace', user_name: 'Alice' },
        ),
    });
    expect(await registry.callTool('greet', { name: 'Bob' }, ctx)).toEqual({
      content: [{ type: 'text', text: 'Hello, Bob!' }],
    });
    expect(await registry.callTool('slow_compute', { seconds: 0, label: 'x' }, ctx)).toEqual({
      content: [{ type: 'text', text: 'Computed x after 0 s' }],
    });
    await expect(registry.callTool('protocol_error_job', {}, ctx)).rejects.toBeInstanceOf(McpProtocolError);
    expect((await registry.callTool('multi_input', {}, ctx)).content[0]).toMatchObject({
      text: 'Hello, Ada Lovelace!',
    });
    expect(ctx.inputs.map((i) => i.key)).toEqual(['first_name', 'last_name']);
    const task = await registry.callTool('test_tool_with_task', {}, ctx);
    expect(task.content[0]).toMatchObject({ text: expect.stringContaining('Alice') });
  });

  it('stops slow_compute when the signal aborts, propagating instead of reporting a tool error', async () => {
    const ctx = new RecordingToolContext();
    const running = registry.callTool('slow_compute', { seconds: 30 }, ctx);
    setTimeout(() => ctx.controller.abort(), 20);
    const started = Date.now();
    await expect(running).rejects.toMatchObject({ name: 'AbortError' });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('fails failing_job with a tool error after about a second', async () => {
    const started = Date.now();
    const result = await registry.callTool('failing_job', {}, new RecordingToolContext());
    expect(result).toEqual({
      content: [{ type: 'text', text: 'failing_job failed on purpose' }],
      isError: true,
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
  });
});
