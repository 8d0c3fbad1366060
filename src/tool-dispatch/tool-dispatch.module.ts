import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { ToolExplorer } from './tool-explorer.service.js';
import { ToolRegistry } from './tool-registry.service.js';

/**
 * Discovers the MCP tools, resources and prompts of every provider in the application and serves them through
 * `ToolRegistry`. Import it where the registry is needed (the gateway); tool modules do not import it.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [ToolExplorer, ToolRegistry],
  exports: [ToolRegistry],
})
export class ToolDispatchModule {}
