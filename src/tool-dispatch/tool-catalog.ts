import type { InputValidator } from './schema/input-validator.js';
import type { ToolContext } from './tool-context.js';
import type {
  CompletionArgument,
  CompletionContext,
  CompletionRef,
  PromptDescriptor,
  ResourceDescriptor,
  ResourceRequest,
  ResourceTemplateDescriptor,
  ToolDescriptor,
} from './tool-dispatch.types.js';
import type { UriTemplate } from './uri-template.js';

/** Everything discovery found, checked and compiled once at startup; the registry only reads it. */

/** `Class.method`, used in every startup and log message about a definition. */
export type DefinitionSource = string;

export interface ToolDefinition {
  descriptor: ToolDescriptor;
  input: InputValidator;
  output?: InputValidator;
  handler: (args: unknown, ctx: ToolContext) => unknown;
  source: DefinitionSource;
}

export interface ResourceDefinition {
  descriptor: ResourceDescriptor;
  handler: (request: ResourceRequest, ctx: ToolContext) => unknown;
  source: DefinitionSource;
}

export interface ResourceTemplateDefinition {
  descriptor: ResourceTemplateDescriptor;
  template: UriTemplate;
  handler: (request: ResourceRequest, ctx: ToolContext) => unknown;
  source: DefinitionSource;
}

export interface PromptDefinition {
  descriptor: PromptDescriptor;
  /** Set when the prompt's arguments are a DTO class. */
  dto?: InputValidator;
  handler: (args: unknown, ctx: ToolContext) => unknown;
  source: DefinitionSource;
}

export interface CompletionDefinition {
  ref: CompletionRef;
  handler: (argument: CompletionArgument, context: CompletionContext) => unknown;
  source: DefinitionSource;
}

export interface ToolCatalog {
  tools: Map<string, ToolDefinition>;
  resources: Map<string, ResourceDefinition>;
  templates: Map<string, ResourceTemplateDefinition>;
  prompts: Map<string, PromptDefinition>;
  /** Keyed by `prompt:<name>` or `resource:<uri template or uri>`. */
  completions: Map<string, CompletionDefinition>;
}

export function completionKey(ref: CompletionRef): string {
  return ref.type === 'ref/prompt' ? `prompt:${ref.name}` : `resource:${ref.uri}`;
}
