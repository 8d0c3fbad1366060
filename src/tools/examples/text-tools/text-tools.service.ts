import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  McpCompletion,
  McpPrompt,
  McpResource,
  McpTool,
  ToolDispatchError,
  ToolDispatchErrorCode,
  type CompletionArgument,
  type ResourceRequest,
  type ToolContext,
} from '../../../tool-dispatch/index.js';
import { AnalyseTextInput } from './analyse-text.input.js';
import { SUMMARY_STYLES, SummaryPromptArgs } from './summary-prompt.args.js';
import { WordCountInput } from './word-count.input.js';
import { WordCountOutput } from './word-count.output.js';

// A Map, not an object literal: a term such as `constructor` or `__proto__` must not find Object.prototype.
const GLOSSARY = new Map<string, string>([
  ['token', 'A unit of text, usually a word or a piece of one.'],
  ['stem', 'The base form of a word once suffixes are removed.'],
  ['stopword', 'A very common word (the, a, of) that analyses usually ignore.'],
]);

/**
 * The text-utilities team's tools: an example of a complete tool module (see docs/tool-authoring.md).
 * An ordinary Nest provider; the decorators are all the registration there is.
 */
@Injectable()
export class TextToolsService {
  @McpTool({
    name: 'word_count',
    title: 'Word count',
    description: 'Counts the words and characters of a text.',
    input: WordCountInput,
    output: WordCountOutput,
    annotations: { readOnlyHint: true, idempotentHint: true },
  })
  wordCount(args: WordCountInput): WordCountOutput {
    const words = args.text.split(/\s+/).filter((w) => w.length > 0);
    const counted = args.unique ? new Set(words.map((w) => w.toLowerCase())).size : words.length;
    return { words: counted, characters: args.text.length };
  }

  @McpTool({
    name: 'analyse_text',
    title: 'Analyse text',
    description: 'Counts words per line, reporting progress line by line. Can run as a task.',
    input: AnalyseTextInput,
    taskSupport: 'optional',
  })
  async analyseText(args: AnalyseTextInput, ctx: ToolContext): Promise<string> {
    const lines = args.text.split('\n');
    const counts: number[] = [];
    for (const [i, line] of lines.entries()) {
      // A cancelled call stops here: the abort error propagates instead of becoming a tool error.
      ctx.signal.throwIfAborted();
      if (args.delayMs) await sleep(args.delayMs, undefined, { signal: ctx.signal });
      counts.push(line.split(/\s+/).filter((w) => w.length > 0).length);
      await ctx.progress({
        progress: i + 1,
        total: lines.length,
        message: `line ${i + 1} of ${lines.length}`,
      });
    }
    return counts.map((n, i) => `line ${i + 1}: ${n} words`).join('\n');
  }

  @McpResource({
    uriTemplate: 'text://glossary/{term}',
    name: 'glossary-term',
    description: 'The definition of one text-analysis term.',
    mimeType: 'text/plain',
  })
  glossaryTerm({ uri, params }: ResourceRequest): string {
    const definition = GLOSSARY.get(params.term);
    if (!definition) {
      throw new ToolDispatchError(
        ToolDispatchErrorCode.RESOURCE_NOT_FOUND,
        `No glossary entry for ${params.term}`,
        {
          uri,
        },
      );
    }
    return definition;
  }

  @McpResource({
    uri: 'text://glossary',
    name: 'glossary',
    description: 'Every glossary term.',
    mimeType: 'application/json',
  })
  glossary(): string {
    return JSON.stringify([...GLOSSARY.keys()]);
  }

  @McpPrompt({
    name: 'summarise',
    title: 'Summarise',
    description: 'Asks the model to summarise a text.',
    arguments: SummaryPromptArgs,
  })
  summarise(args: SummaryPromptArgs): string {
    return `Summarise the following text as ${args.style ?? 'one-paragraph'}:\n\n${args.text}`;
  }

  @McpCompletion({ ref: { type: 'ref/prompt', name: 'summarise' } })
  completeSummarise(argument: CompletionArgument): string[] {
    if (argument.name !== 'style') return [];
    return SUMMARY_STYLES.filter((s) => s.startsWith(argument.value));
  }
}
