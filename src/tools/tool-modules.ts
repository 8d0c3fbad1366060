import type { DynamicModule, Type } from '@nestjs/common';
import type { AppConfig } from '../config/app-config.js';
import { BenchToolsModule } from './bench/bench-tools.module.js';
import { ConformanceModule } from './conformance/conformance.module.js';
import { TextToolsModule } from './example/text-tools.module.js';

/**
 * The one place a team lists its tool module. Each is an ordinary Nest module whose providers carry
 * `@McpTool` / `@McpResource` / `@McpPrompt` methods; ToolDispatchModule finds them, nothing else to register.
 */
export const TOOL_MODULES: readonly Type[] = [TextToolsModule];

/**
 * The tool modules AppModule imports for this configuration: the list above, or, for a conformance run, only
 * the fixture module, since the official suite expects exactly its fixtures (it calls the first listed tool).
 * MCP_BENCH_TOOLS adds the benchmark's echo tools to the team modules.
 */
export function toolModules(config: AppConfig): (Type | DynamicModule)[] {
  if (config.MCP_CONFORMANCE_FIXTURES) return [ConformanceModule];
  return config.MCP_BENCH_TOOLS ? [...TOOL_MODULES, BenchToolsModule] : [...TOOL_MODULES];
}
