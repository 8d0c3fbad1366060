import { Module } from '@nestjs/common';
import { ToolDispatchModule } from '../tool-dispatch/tool-dispatch.module.js';
import { McpMethodsService } from './mcp-methods.service.js';
import { MethodRegistry } from './method-registry.js';

/**
 * The protocol layer: the method registry every era handler routes through, and the methods served on top
 * of the tool catalog (tools, resources, prompts, completions, server/discover), which register themselves.
 */
@Module({
  imports: [ToolDispatchModule],
  providers: [MethodRegistry, McpMethodsService],
  exports: [MethodRegistry, McpMethodsService],
})
export class ProtocolModule {}
