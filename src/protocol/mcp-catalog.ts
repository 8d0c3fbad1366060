import type { ToolContext, TaskSupport } from '../tool-dispatch/tool-context.js';

/**
 * What the protocol layer needs from tool dispatch. Bound to the tool-dispatch registry in GatewayModule;
 * keeping the protocol layer on this narrow interface keeps wire shapes out of tool dispatch and back.
 */
export interface ToolInfo {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  annotations?: Record<string, unknown>;
  taskSupport: TaskSupport;
  scopes: readonly string[];
}

export interface McpCatalog {
  listTools(): ToolInfo[];
  getTool(name: string): ToolInfo | undefined;
  callTool(name: string, args: unknown, ctx: ToolContext): Promise<Record<string, unknown>>;
  listResources(): Record<string, unknown>[];
  listResourceTemplates(): Record<string, unknown>[];
  readResource(uri: string, ctx: ToolContext): Promise<Record<string, unknown>>;
  listPrompts(): Record<string, unknown>[];
  getPrompt(name: string, args: Record<string, unknown>, ctx: ToolContext): Promise<Record<string, unknown>>;
  complete(
    ref: Record<string, unknown>,
    argument: { name: string; value: string },
    context?: Record<string, unknown>,
  ): Promise<{ values: string[]; total?: number; hasMore?: boolean }>;
}

export const MCP_CATALOG = Symbol('MCP_CATALOG');
