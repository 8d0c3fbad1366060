import { Module } from '@nestjs/common';
import { ToolDispatchModule } from '../tool-dispatch/tool-dispatch.module.js';
import { McpTelemetry } from './mcp-telemetry.service.js';

@Module({ imports: [ToolDispatchModule], providers: [McpTelemetry], exports: [McpTelemetry] })
export class TelemetryModule {}
