import type { DynamicModule, Type } from '@nestjs/common';
import type { LoadedConfig } from '../config/loaded-config.js';
import { BenchToolsModule } from './bench/bench-tools.module.js';
import { ConformanceModule } from './conformance/conformance.module.js';
import { TextToolsModule } from './examples/text-tools/text-tools.module.js';
import { ApprovalFlowModule } from './examples/approval-flow/approval-flow.module.js';
import { CustomerLookupModule } from './examples/customer-lookup/customer-lookup.module.js';
import { ReportJobModule } from './examples/report-job/report-job.module.js';
import { ErpExportModule } from './examples/erp-export/erp-export.module.js';
import { ExamplesConfig } from './examples/examples.config.js';
import { ToolsConfig } from './tools.config.js';

/**
 * The one place a team lists its tool module. Each is an ordinary Nest module whose providers carry
 * `@McpTool` / `@McpResource` / `@McpPrompt` methods; ToolDispatchModule finds them, nothing else to register.
 * `npm run new:tool-module -- <team>` adds its module here.
 */
export const TOOL_MODULES: readonly Type[] = [TextToolsModule];

/** The worked examples of docs/tool-authoring.md (src/tools/examples); EXAMPLE_TOOLS=false leaves them out. */
export const EXAMPLE_TOOL_MODULES: readonly Type[] = [
  ReportJobModule,
  ApprovalFlowModule,
  CustomerLookupModule,
  ErpExportModule,
];

/**
 * The tool modules AppModule imports for this configuration: the lists above, or, for a conformance run, only
 * the fixture module, since the official suite expects exactly its fixtures (it calls the first listed tool).
 * MCP_BENCH_TOOLS adds the benchmark's echo tools to the team modules.
 */
export function toolModules(loaded: LoadedConfig): (Type | DynamicModule)[] {
  const config = loaded.get(ToolsConfig);
  if (config.MCP_CONFORMANCE_FIXTURES) return [ConformanceModule];
  return [
    ...TOOL_MODULES,
    ...(loaded.get(ExamplesConfig).EXAMPLE_TOOLS ? EXAMPLE_TOOL_MODULES : []),
    ...(config.MCP_BENCH_TOOLS ? [BenchToolsModule] : []),
  ];
}
