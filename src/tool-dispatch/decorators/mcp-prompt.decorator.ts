import { DiscoveryService } from '@nestjs/core';
import type { DtoClass, PromptArgument } from '../tool-dispatch.types.js';

export interface McpPromptOptions {
  name: string;
  title?: string;
  description: string;
  /**
   * A DTO class (string properties; optional ones via `@IsOptional`, descriptions via `@Describe`) or a plain
   * list. Unknown arguments are refused either way.
   */
  arguments?: DtoClass | PromptArgument[];
}

export const MCP_PROMPT_DECORATOR = DiscoveryService.createDecorator<McpPromptOptions>();

/**
 * Marks a provider method as an MCP prompt, called as `(args, ctx: ToolContext)` with the validated arguments
 * (a DTO instance when `arguments` is a class). See `ToolRegistry.getPrompt` for what it may return.
 */
export function McpPrompt(options: McpPromptOptions): MethodDecorator {
  return MCP_PROMPT_DECORATOR(options);
}
