import { DiscoveryService } from '@nestjs/core';
import type { CompletionRef } from '../tool-dispatch.types.js';

export interface McpCompletionOptions {
  /** The prompt or resource template whose arguments this method completes; it must exist. */
  ref: CompletionRef;
}

export const MCP_COMPLETION_DECORATOR = DiscoveryService.createDecorator<McpCompletionOptions>();

/**
 * Marks a provider method as the completion source of one prompt or resource template, called as
 * `(argument: { name, value }, context: { arguments? })` and returning `string[]` or `{ values, total?, hasMore? }`.
 * The registry keeps at most 100 values and sets `hasMore` when it cut the list.
 */
export function McpCompletion(options: McpCompletionOptions): MethodDecorator {
  return MCP_COMPLETION_DECORATOR(options);
}
