import { Module } from '@nestjs/common';
import { BenchToolsService } from './bench-tools.service.js';

/** Tools for bench/ (MCP_BENCH_TOOLS=true); not part of a normal deployment. */
@Module({ providers: [BenchToolsService] })
export class BenchToolsModule {}
