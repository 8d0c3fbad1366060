import { DiscoveryService } from '@nestjs/core';

interface McpResourceBase {
  name: string;
  title?: string;
  description: string;
  mimeType?: string;
}

/** Either a fixed `uri` or an RFC 6570 level-1 `uriTemplate` such as `notes://{folder}/{id}`. */
export type McpResourceOptions = McpResourceBase & ({ uri: string } | { uriTemplate: string });

export const MCP_RESOURCE_DECORATOR = DiscoveryService.createDecorator<McpResourceOptions>();

/**
 * Marks a provider method as an MCP resource (fixed `uri`) or resource template (`uriTemplate`). The method is
 * called as `({ uri, params }, ctx: ToolContext)`, `params` holding the template variables (percent-decoded).
 * See `ToolRegistry.readResource` for what it may return.
 */
export function McpResource(options: McpResourceOptions): MethodDecorator {
  return MCP_RESOURCE_DECORATOR(options);
}
