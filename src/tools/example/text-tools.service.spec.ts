import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { RecordingToolContext } from '../../../test/support/recording-tool-context.js';
import { bootToolRegistry } from '../../../test/support/tool-registry-context.js';
import type { ToolRegistry } from '../../tool-dispatch/tool-registry.service.js';
import { TextToolsModule } from './text-tools.module.js';

describe('TextToolsModule (the example tool module)', () => {
  let app: INestApplicationContext;
  let registry: ToolRegistry;
  beforeAll(async () => {
    ({ app, registry } = await bootToolRegistry(TextToolsModule));
  });
  afterAll(async () => {
    await app.close();
  });

  it('publishes word_count with derived input and output schemas', () => {
    const tool = registry.getTool('word_count')!;
    expect(tool.inputSchema).toEqual({
      type: 'object',
      properties: {
        text: { type: 'string', maxLength: 100000, description: 'The text whose words are counted' },
        unique: {
          type: 'boolean',
          description: 'Count each distinct word once (case-insensitive)',
          default: false,
        },
      },
      required: ['text'],
      additionalProperties: false,
    });
    expect(tool.outputSchema).toMatchObject({ required: ['words', 'characters'] });
    expect(tool.annotations).toEqual({ readOnlyHint: true, idempotentHint: true });
  });

  it('counts words into structured content with a text copy', async () => {
    const result = await registry.callTool(
      'word_count',
      { text: 'the cat and The dog', unique: true },
      new RecordingToolContext(),
    );
    expect(result).toEqual({
      content: [{ type: 'text', text: '{"words":4,"characters":19}' }],
      structuredContent: { words: 4, characters: 19 },
    });
  });

  it('reports progress per line and stops when cancelled', async () => {
    const ctx = new RecordingToolContext();
    const done = await registry.callTool('analyse_text', { text: 'a b\nc' }, ctx);
    expect(done.content[0]).toMatchObject({ text: 'line 1: 2 words\nline 2: 1 words' });
    expect(ctx.progressUpdates.map((p) => [p.progress, p.total])).toEqual([
      [1, 2],
      [2, 2],
    ]);
    const cancelled = new RecordingToolContext();
    const running = registry.callTool('analyse_text', { text: 'a\nb\nc\nd', delayMs: 200 }, cancelled);
    setTimeout(() => cancelled.controller.abort(), 50);
    await expect(running).rejects.toMatchObject({ name: 'AbortError' });
    expect(cancelled.progressUpdates).toHaveLength(0);
  });

  it('serves the glossary resource, its template, and RESOURCE_NOT_FOUND for unknown terms', async () => {
    const ctx = new RecordingToolContext();
    expect((await registry.readResource('text://glossary/stem', ctx)).contents[0]).toMatchObject({
      mimeType: 'text/plain',
      text: expect.stringContaining('base form'),
    });
    await expect(registry.readResource('text://glossary/nope', ctx)).rejects.toMatchObject({
      code: 'RESOURCE_NOT_FOUND',
      data: { uri: 'text://glossary/nope' },
    });
  });

  it('renders the summarise prompt and completes its style argument', async () => {
    const prompt = await registry.getPrompt(
      'summarise',
      { text: 'Long text', style: 'tweet' },
      new RecordingToolContext(),
    );
    expect(prompt.messages[0].content).toEqual({
      type: 'text',
      text: 'Summarise the following text as tweet:\n\nLong text',
    });
    expect(registry.listPrompts()[0].arguments).toEqual([
      { name: 'text', description: 'The text to summarise', required: true },
      {
        name: 'style',
        description: 'How to summarise: bullet-points, one-paragraph, tweet',
        required: false,
      },
    ]);
    expect(
      await registry.complete({ type: 'ref/prompt', name: 'summarise' }, { name: 'style', value: 'b' }),
    ).toEqual({
      values: ['bullet-points'],
    });
  });
});
