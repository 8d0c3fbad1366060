import type { LimitsPolicy } from './tool-limits.js';
import type { JsonObject, TaskSupport } from './tool-context.js';

/**
 * The result and descriptor shapes of the tool-author API. They follow the MCP 2025-11-25 schema for the parts
 * both protocol eras share; era-specific envelope fields (`resultType`, `execution`, cache hints) are added by
 * the protocol layer, never here.
 */

/** A JSON Schema object as emitted in `tools/list`. */
export type JsonSchema = JsonObject;

/** A class whose class-validator decorators describe an input (see `Describe` for field descriptions). */
export type DtoClass<T = object> = new () => T;

/** Either a class-validator DTO class (schema derived) or a raw JSON Schema object (emitted verbatim). */
export type SchemaSource = DtoClass | JsonSchema;

export interface Annotations {
  audience?: ('user' | 'assistant')[];
  priority?: number;
  lastModified?: string;
}

export interface TextContent {
  type: 'text';
  text: string;
  annotations?: Annotations;
  _meta?: JsonObject;
}

export interface ImageContent {
  type: 'image';
  /** Base64 data. */
  data: string;
  mimeType: string;
  annotations?: Annotations;
  _meta?: JsonObject;
}

export interface AudioContent {
  type: 'audio';
  /** Base64 data. */
  data: string;
  mimeType: string;
  annotations?: Annotations;
  _meta?: JsonObject;
}

export interface ResourceLink {
  type: 'resource_link';
  uri: string;
  name: string;
  title?: string;
  description?: string;
  mimeType?: string;
  annotations?: Annotations;
  _meta?: JsonObject;
}

export interface TextResourceContents {
  uri: string;
  mimeType?: string;
  text: string;
  _meta?: JsonObject;
}

export interface BlobResourceContents {
  uri: string;
  mimeType?: string;
  /** Base64 data. */
  blob: string;
  _meta?: JsonObject;
}

export type ResourceContents = TextResourceContents | BlobResourceContents;

export interface EmbeddedResource {
  type: 'resource';
  resource: ResourceContents;
  annotations?: Annotations;
  _meta?: JsonObject;
}

export type ContentBlock = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource;

export interface CallToolResult {
  content: ContentBlock[];
  structuredContent?: JsonObject;
  isError?: boolean;
  _meta?: JsonObject;
}

export interface ToolAnnotations {
  title?: string;
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

/** One entry of `tools/list` plus the server-side fields the gateway needs (`taskSupport`, `scopes`). */
export interface ToolDescriptor {
  name: string;
  title?: string;
  description: string;
  inputSchema: JsonSchema;
  outputSchema?: JsonSchema;
  annotations?: ToolAnnotations;
  /** Rendered by the protocol layer as `execution.taskSupport`. */
  taskSupport: TaskSupport;
  /** Scopes a caller needs (all of them) to see and call the tool; empty means any authenticated caller. */
  scopes: readonly string[];
  /** The tool's durability declaration, validated and with its defaults (never on the wire). */
  durability: DurabilityPolicy;
  /** The tool's cluster-wide limits, validated; absent when it declares none (never on the wire). */
  limits?: LimitsPolicy;
  /** The fields the audit trail stores, validated (never on the wire). */
  audit: AuditPolicy;
}

/** `McpToolOptions.audit` as the server applies it (validated at boot by the tool explorer). */
export interface AuditPolicy {
  readonly arguments: readonly string[];
  readonly result: readonly string[];
}

/** What a tool that opts no field in gets: sizes and hashes only. */
export const NO_AUDIT: AuditPolicy = Object.freeze({
  arguments: Object.freeze([]),
  result: Object.freeze([]),
});

/** A retry policy with its defaults filled in (see RetryPolicy). */
export interface NormalisedRetryPolicy {
  readonly maxAttempts: number;
  readonly initialDelayMs: number;
  readonly factor: number;
  readonly maxDelayMs: number;
  readonly retryOn?: (error: unknown) => boolean;
}

/** `McpToolOptions.durability` as the server applies it (the tool explorer validates and normalises it). */
export interface DurabilityPolicy {
  readonly resumable: boolean;
  /** Runs in all, copied to each task at creation: retry.maxAttempts, else 3 when resumable, else 1. */
  readonly maxAttempts: number;
  /** Absent: a handler error ends the task as it always did (no retries). */
  readonly retry?: NormalisedRetryPolicy;
  /** The longest run the tool expects, in ms (a task without a ttl is granted one covering it). */
  readonly maxRunMs?: number;
}

/** What a tool that declares no durability gets: one run, not resumable. */
export const NO_DURABILITY: DurabilityPolicy = Object.freeze({ resumable: false, maxAttempts: 1 });

export interface ResourceDescriptor {
  uri: string;
  name: string;
  title?: string;
  description: string;
  mimeType?: string;
}

export interface ResourceTemplateDescriptor {
  uriTemplate: string;
  name: string;
  title?: string;
  description: string;
  mimeType?: string;
}

export interface ReadResourceResult {
  contents: ResourceContents[];
  _meta?: JsonObject;
}

/** What a resource handler receives: the requested URI and, for a template, its variables. */
export interface ResourceRequest {
  uri: string;
  params: Record<string, string>;
}

export interface PromptArgument {
  name: string;
  description?: string;
  required?: boolean;
}

export interface PromptDescriptor {
  name: string;
  title?: string;
  description: string;
  arguments?: PromptArgument[];
}

export interface PromptMessage {
  role: 'user' | 'assistant';
  content: ContentBlock;
}

export interface GetPromptResult {
  description?: string;
  messages: PromptMessage[];
  _meta?: JsonObject;
}

export type CompletionRef = { type: 'ref/prompt'; name: string } | { type: 'ref/resource'; uri: string };

export interface CompletionArgument {
  name: string;
  value: string;
}

/** Extra context of a completion request: the values of the other arguments already filled in. */
export interface CompletionContext {
  arguments?: Record<string, string>;
}

export interface CompleteResult {
  values: string[];
  total?: number;
  hasMore?: boolean;
}

/** What a tool handler may return; see `ToolRegistry.callTool` for how each shape is normalised. */
export type ToolHandlerResult = string | CallToolResult | JsonObject | undefined | null;

/** What a resource handler may return; see `ToolRegistry.readResource`. */
export type ResourceHandlerResult =
  string | Uint8Array | ResourceContents | ResourceContents[] | ReadResourceResult;

/** What a prompt handler may return; see `ToolRegistry.getPrompt`. */
export type PromptHandlerResult = string | PromptMessage[] | GetPromptResult;

/** What a completion handler may return. */
export type CompletionHandlerResult = string[] | CompleteResult;
