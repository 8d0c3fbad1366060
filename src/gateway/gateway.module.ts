import { Global, Module } from '@nestjs/common';
import { McpMethodsService } from '../protocol/mcp-methods.service.js';
import { SessionsModule } from '../sessions/sessions.module.js';
import { TasksModule } from '../tasks/tasks.module.js';
import { TelemetryModule } from '../telemetry/telemetry.module.js';
import { McpNotifier } from '../tool-dispatch/mcp-notifier.js';
import { GatewayNotifier } from './gateway-notifier.service.js';
import { ToolDispatchModule } from '../tool-dispatch/tool-dispatch.module.js';
import { ClientRequestsService } from './client-requests.service.js';
import { InFlightService } from './in-flight.service.js';
import { LegacyMcpHandler } from './legacy-mcp.handler.js';
import { McpRequestExecutor } from './mcp-request.executor.js';
import { McpController } from './mcp.controller.js';
import { ModernMcpHandler } from './modern-mcp.handler.js';
import { SseStreams } from './sse-streams.service.js';
import { StreamHub } from './stream-hub.service.js';
import { TaskExecutor } from './task-executor.service.js';
import { TasksProtocolService } from './tasks-protocol.service.js';

/** Global so that tool modules can inject McpNotifier without importing the gateway. */
@Global()
@Module({
  imports: [SessionsModule, ToolDispatchModule, TasksModule, TelemetryModule],
  controllers: [McpController],
  providers: [
    StreamHub,
    SseStreams,
    ClientRequestsService,
    InFlightService,
    McpRequestExecutor,
    McpMethodsService,
    LegacyMcpHandler,
    ModernMcpHandler,
    TaskExecutor,
    TasksProtocolService,
    GatewayNotifier,
    { provide: McpNotifier, useExisting: GatewayNotifier },
  ],
  exports: [McpNotifier, LegacyMcpHandler, ModernMcpHandler, McpMethodsService, StreamHub],
})
export class GatewayModule {}
