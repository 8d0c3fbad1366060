import { Module } from '@nestjs/common';
import { CoreResourcesService } from './core-resources.service.js';
import { CoreToolsService } from './core-tools.service.js';
import { DurableToolsService } from './durable-tools.service.js';
import { InputRequiredToolsService } from './input-required-tools.service.js';
import { LimitedToolsService } from './limited-tools.service.js';
import { TaskToolsService } from './task-tools.service.js';

/**
 * The fixtures the MCP conformance suite expects (conformance.md §2), written with the public tool API only.
 * Registered only when MCP_CONFORMANCE_FIXTURES=true (src/tools/tool-modules.ts); `test_reconnection` is the
 * gateway's, since it needs transport hooks.
 */
@Module({
  // The durable-execution fixtures, then the queue-sharing one, come last: the tools before them keep their places in tools/list.
  providers: [
    CoreToolsService,
    CoreResourcesService,
    InputRequiredToolsService,
    TaskToolsService,
    DurableToolsService,
    LimitedToolsService,
  ],
})
export class ConformanceModule {}
