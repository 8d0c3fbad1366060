import { ToolTestHarness } from '../../../testing/index.js';
import { TextToolsModule } from './text-tools.module.js';

describe('TextToolsModule (the example tool module)', () => {
  let tools: ToolTestHarness;
  beforeAll(async () => {
    tools = await ToolTestHarness.create([TextToolsModule]);
  });
  afterAll(async () => {
    await tools.close();
  });

  it('publishes word_count with derived input and output schemas', () => {
    const tool = tools.describe('word_count')!;
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
    const { result } = await tools.call('word_count', { text: 'the cat and The dog', unique: true });
    expect(result).toEqual({
      content: [{ type: 'text', text: '{"words":4,"characters":19}' }],
      structuredContent: { words: 4, characters: 19 },
    });
  });

  it('refuses bad arguments naming the field, before the handler runs', async () => {
    await expect(tools.call('word_count', { text: 7, colour: 'red' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENTS',
      data: {
        problems: expect.arrayContaining([
          expect.stringMatching(/^arguments\.text must be a string/),
          expect.stringMatching(/^arguments\.colour/),
        ]),
      },
    });
  });

  it('reports progress per line and stops when cancelled', async () => {
    const done = await tools.call('analyse_text', { text: 'a b\nc' });
    expect(done.result.content[0]).toMatchObject({ text: 'line 1: 2 words\nline 2: 1 words' });
    expect(done.progress.map((p) => [p.progress, p.total])).toEqual([
      [1, 2],
      [2, 2],
    ]);
    const cancel = new AbortController();
    const running = tools.call(
      'analyse_text',
      { text: 'a\nb\nc\nd', delayMs: 200 },
      { signal: cancel.signal },
    );
    setTimeout(() => cancel.abort(), 50);
    await expect(running).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('serves the glossary resource, its template, and RESOURCE_NOT_FOUND for unknown terms', async () => {
    expect((await tools.readResource('text://glossary/stem')).contents[0]).toMatchObject({
      mimeType: 'text/plain',
      text: expect.stringContaining('base form'),
    });
    await expect(tools.readResource('text://glossary/nope')).rejects.toMatchObject({
      code: 'RESOURCE_NOT_FOUND',
      data: { uri: 'text://glossary/nope' },
    });
  });

  it('renders the summarise prompt and completes its style argument', async () => {
    const prompt = await tools.getPrompt('summarise', { text: 'Long text', style: 'tweet' });
    expect(prompt.messages[0].content).toEqual({
      type: 'text',
      text: 'Summarise the following text as tweet:\n\nLong text',
    });
    expect(tools.registry.listPrompts()[0].arguments).toEqual([
      { name: 'text', description: 'The text to summarise', required: true },
      {
        name: 'style',
        description: 'How to summarise: bullet-points, one-paragraph, tweet',
        required: false,
      },
    ]);
    expect(
      await tools.complete({ type: 'ref/prompt', name: 'summarise' }, { name: 'style', value: 'b' }),
    ).toEqual({
      values: ['bullet-points'],
    });
  });
});
