// The public tool-author API. Tool modules import from here and nowhere else in tool-dispatch/.
export { McpTool, type McpToolOptions } from './decorators/mcp-tool.decorator.js';
export { McpResource, type McpResourceOptions } from './decorators/mcp-resource.decorator.js';
export { McpPrompt, type McpPromptOptions } from './decorators/mcp-prompt.decorator.js';
export { McpCompletion, type McpCompletionOptions } from './decorators/mcp-completion.decorator.js';
export { Describe, type FieldDescription } from './decorators/describe.decorator.js';
export {
  McpControlSignal,
  McpProtocolError,
  type ElicitParams,
  type ElicitResult,
  type InputApi,
  type InputRequestOptions,
  type JsonObject,
  type LoggingLevel,
  type ProgressUpdate,
  type RootsResult,
  type SampleParams,
  type SampleResult,
  type TaskSupport,
  type RetryPolicy,
  type ToolDurability,
  type ToolAuditFields,
  type ToolContext,
  type JsonValue,
} from './tool-context.js';
export { CheckpointError, serialiseCheckpoint, CHECKPOINT_SETTING } from './checkpoint.js';
export type { ToolLimits } from './tool-limits.js';
export { McpNotifier } from './mcp-notifier.js';
export type { Principal } from '../principals/principal.js';
export { ToolDispatchError, ToolDispatchErrorCode } from './tool-dispatch.errors.js';
export type {
  Annotations,
  AudioContent,
  BlobResourceContents,
  CallToolResult,
  CompleteResult,
  CompletionArgument,
  CompletionContext,
  CompletionHandlerResult,
  CompletionRef,
  ContentBlock,
  DtoClass,
  EmbeddedResource,
  GetPromptResult,
  ImageContent,
  JsonSchema,
  PromptArgument,
  PromptHandlerResult,
  PromptMessage,
  ReadResourceResult,
  ResourceContents,
  ResourceHandlerResult,
  ResourceLink,
  ResourceRequest,
  SchemaSource,
  TextContent,
  TextResourceContents,
  ToolAnnotations,
  ToolHandlerResult,
} from './tool-dispatch.types.js';
