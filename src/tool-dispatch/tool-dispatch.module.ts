import { Module, type OnModuleInit } from '@nestjs/common';
import { registerErrorMapper } from '../common/error-mappers.js';
import { DiscoveryModule } from '@nestjs/core';
import { ToolExplorer } from './tool-explorer.service.js';
import { ToolRegistry } from './tool-registry.service.js';
import { mapToolDispatchError } from './tool-dispatch.error-mapper.js';
import { ToolDispatchError } from './tool-dispatch.errors.js';

/**
 * Discovers the MCP tools, resources and prompts of every provider in the application and serves them through
 * `ToolRegistry`. Import it where the registry is needed (the gateway); tool modules do not import it.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [ToolExplorer, ToolRegistry],
  exports: [ToolRegistry],
})
export class ToolDispatchModule implements OnModuleInit {
  onModuleInit(): void {
    registerErrorMapper(ToolDispatchError, mapToolDispatchError);
  }
}
