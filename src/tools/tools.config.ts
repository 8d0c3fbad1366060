import { ConfigSection } from '../config/config-section.js';
import { BoolEnv, Env } from '../config/env.decorators.js';
import { ServerConfig } from '../config/server.config.js';

@ConfigSection<ToolsConfig>({
  module: 'tools',
  summary: 'Which of the built-in tool modules are served.',
  checks: (c, ctx) =>
    ctx.get(ServerConfig).isProduction && c.MCP_CONFORMANCE_FIXTURES
      ? ['MCP_CONFORMANCE_FIXTURES must be false when NODE_ENV=production (test fixtures only)']
      : [],
})
export class ToolsConfig {
  @Env(
    "register the MCP conformance suite's fixture tools, resources and prompts (`src/tools/conformance`); for " +
      'conformance runs only, never production',
  )
  @BoolEnv()
  MCP_CONFORMANCE_FIXTURES = false;

  @Env(
    'register the benchmark tools `echo`, `echo_task`, `echo_task_required`, `echo_task_durable` (`src/tools/bench`); ' +
      'for `bench/` only',
  )
  @BoolEnv()
  MCP_BENCH_TOOLS = false;
}
