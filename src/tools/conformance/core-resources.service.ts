import { Injectable } from '@nestjs/common';
import {
  McpCompletion,
  McpPrompt,
  McpResource,
  type CompletionArgument,
  type PromptMessage,
  type ResourceRequest,
} from '../../tool-dispatch/index.js';
import { PNG_1X1_BASE64 } from './fixture-media.js';
import { EmbeddedResourcePromptArgs } from './inputs/embedded-resource-prompt.args.js';

const ARG_SUGGESTIONS = ['paris', 'park', 'party', 'test', 'testValue1', 'testValue2'];

/** The resources, prompts and completion of the conformance core fixture (conformance.md §2.1). */
@Injectable()
export class CoreResourcesService {
  @McpResource({
    uri: 'test://static-text',
    name: 'static-text',
    description: 'A static text resource.',
    mimeType: 'text/plain',
  })
  staticText(): string {
    return 'This is the content of the static text resource.';
  }

  @McpResource({
    uri: 'test://static-binary',
    name: 'static-binary',
    description: 'A static binary resource (a 1x1 PNG).',
    mimeType: 'image/png',
  })
  staticBinary() {
    return { blob: PNG_1X1_BASE64 };
  }

  @McpResource({
    uriTemplate: 'test://template/{id}/data',
    name: 'template-data',
    description: 'JSON data for any id.',
    mimeType: 'application/json',
  })
  templateData({ params }: ResourceRequest): string {
    return JSON.stringify({ id: params.id, templateTest: true, data: `Data for ID: ${params.id}` });
  }

  @McpResource({
    uri: 'test://watched-resource',
    name: 'watched-resource',
    description: 'The target of resources/subscribe and resources/unsubscribe.',
    mimeType: 'text/plain',
  })
  watched(): string {
    return `Watched resource content at ${new Date().toISOString()}`;
  }

  @McpPrompt({ name: 'test_simple_prompt', description: 'A prompt without arguments.' })
  simplePrompt(): string {
    return 'This is a simple prompt for testing.';
  }

  @McpPrompt({
    name: 'test_prompt_with_arguments',
    description: 'A prompt with two required arguments.',
    arguments: [
      { name: 'arg1', description: 'First test argument', required: true },
      { name: 'arg2', description: 'Second test argument', required: true },
    ],
  })
  promptWithArguments(args: Record<string, string>): string {
    return `Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'`;
  }

  @McpCompletion({ ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' } })
  completeArguments(argument: CompletionArgument): string[] {
    return ARG_SUGGESTIONS.filter((s) => s.startsWith(argument.value));
  }

  @McpPrompt({
    name: 'test_prompt_with_embedded_resource',
    description: 'A prompt embedding a resource.',
    arguments: EmbeddedResourcePromptArgs,
  })
  promptWithEmbeddedResource(args: EmbeddedResourcePromptArgs): PromptMessage[] {
    return [
      {
        role: 'user',
        content: {
          type: 'resource',
          resource: {
            uri: args.resourceUri,
            mimeType: 'text/plain',
            text: 'Embedded resource content for testing.',
          },
        },
      },
      { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
    ];
  }

  @McpPrompt({ name: 'test_prompt_with_image', description: 'A prompt with an image.' })
  promptWithImage(): PromptMessage[] {
    return [
      { role: 'user', content: { type: 'image', data: PNG_1X1_BASE64, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
    ];
  }
}
