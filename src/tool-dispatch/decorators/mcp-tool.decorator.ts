import { DiscoveryService } from '@nestjs/core';
import type { TaskSupport, ToolAuditFields, ToolDurability } from '../tool-context.js';
import type { SchemaSource, ToolAnnotations } from '../tool-dispatch.types.js';
import type { ToolLimits } from '../tool-limits.js';

export interface McpToolOptions {
  /** Unique across the server; `^[A-Za-z0-9_.-]{1,128}$`. */
  name: string;
  title?: string;
  description: string;
  /**
   * A class-validator DTO class (the JSON Schema is derived from its decorators and arguments arrive as an
   * instance of it) or a raw JSON Schema object (validated with ajv, emitted verbatim). Omitted: no arguments.
   */
  input?: SchemaSource;
  /** When given, the handler returns structured data, validated and sent as `structuredContent` plus a text copy. */
  output?: SchemaSource;
  /** Whether the call may, must or must not run as a task. Default `'forbidden'`. */
  taskSupport?: TaskSupport;
  /** Retries, resumability and expected run length of the work when it runs as a task (tool-authoring.md). */
  durability?: ToolDurability;
  /**
   * How many of its runs the cluster may have at once, per key of its arguments, and per interval
   * (tool-authoring.md, "Sharing the queue"). A call over a limit waits as a task.
   */
  limits?: ToolLimits;
  /**
   * Fields of the arguments and the structured result the audit trail stores (redacted); everything else is
   * recorded as its size and sha256 only (tool-authoring.md).
   */
  audit?: ToolAuditFields;
  /** Scopes the caller must all hold. */
  scopes?: string[];
  annotations?: ToolAnnotations;
}

export const MCP_TOOL_DECORATOR = DiscoveryService.createDecorator<McpToolOptions>();

/**
 * Marks a method of an ordinary Nest provider as an MCP tool. The method is called as
 * `(args, ctx: ToolContext)`; see `ToolRegistry.callTool` for what it may return and how errors are reported.
 *
 * ```ts
 * @McpTool({ name: 'word_count', description: 'Counts words', input: WordCountInput })
 * wordCount(args: WordCountInput, ctx: ToolContext) { ... }
 * ```
 */
export function McpTool(options: McpToolOptions): MethodDecorator {
  return MCP_TOOL_DECORATOR(options);
}
