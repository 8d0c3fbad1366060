import { Global, Module } from '@nestjs/common';
import { ProtocolModule } from '../protocol/protocol.module.js';
import { SessionsModule } from '../sessions/sessions.module.js';
import { SessionStream } from '../protocol/session-stream.port.js';
import { TelemetryModule } from '../telemetry/telemetry.module.js';
import { McpNotifier } from '../tool-dispatch/mcp-notifier.js';
import { ToolDispatchModule } from '../tool-dispatch/tool-dispatch.module.js';
import { ClientRequestsService } from './client-requests.service.js';
import { GatewayNotifier } from './gateway-notifier.service.js';
import { InFlightService } from './in-flight.service.js';
import { LegacyMcpHandler } from './legacy-mcp.handler.js';
import { McpController } from './mcp.controller.js';
import { McpResponder } from './mcp-responder.js';
import { ModernMcpHandler } from './modern-mcp.handler.js';
import { SessionMethods } from './session-methods.js';
import { SessionStreamAdapter } from './session-stream.adapter.js';
import { SseStreams } from './sse-streams.service.js';
import { StreamHub } from './stream-hub.service.js';

/**
 * The transport: the /mcp controller, the era handlers (which route through protocol/'s method registry),
 * SSE streams, the stream hub and server-to-client requests. Global so that tool modules can inject
 * McpNotifier and the tasks protocol its SessionStream port without importing the gateway.
 */
@Global()
@Module({
  imports: [SessionsModule, ToolDispatchModule, ProtocolModule, TelemetryModule],
  controllers: [McpController],
  providers: [
    StreamHub,
    SseStreams,
    ClientRequestsService,
    InFlightService,
    McpResponder,
    LegacyMcpHandler,
    ModernMcpHandler,
    SessionMethods,
    GatewayNotifier,
    SessionStreamAdapter,
    { provide: McpNotifier, useExisting: GatewayNotifier },
    { provide: SessionStream, useExisting: SessionStreamAdapter },
  ],
  exports: [McpNotifier, SessionStream, LegacyMcpHandler, ModernMcpHandler, StreamHub],
})
export class GatewayModule {}
