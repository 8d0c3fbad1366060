import { IsOptional, Matches, MaxLength, MinLength } from 'class-validator';
import { ConfigSection } from '../../config/config-section.js';
import { BoolEnv, Env, HTTP_URL, IntEnv } from '../../config/env.decorators.js';
import { ServerConfig } from '../../config/server.config.js';

/** The example tool modules' own settings: a tool team's config class lives in its folder, like this one. */
@ConfigSection<ExamplesConfig>({
  module: 'tools/examples',
  summary: 'The example tool modules of `src/tools/examples`.',
  // The example tools (one of them approves refunds) are a development aid: production opts in explicitly.
  resolve: (c, ctx) => {
    if (!ctx.isSet('EXAMPLE_TOOLS')) c.EXAMPLE_TOOLS = !ctx.get(ServerConfig).isProduction;
  },
})
export class ExamplesConfig {
  @Env(
    'register the example tool modules of `src/tools/examples` (`generate_report`, `approve_refund`, ' +
      '`lookup_customer`, `erp_export`); the reference text tools beside them are always served',
    { default: '`true`; `false` when `NODE_ENV=production`' },
  )
  @BoolEnv()
  EXAMPLE_TOOLS = true;

  @Env('duration of one step (one day) of the example `generate_report`; tests set it to a few ms')
  @IntEnv(0, 600000)
  EXAMPLE_REPORT_STEP_MS = 5000;

  @Env('how long one export of the example `erp_export` takes in its stand-in ERP')
  @IntEnv(0, 600000)
  EXAMPLE_ERP_EXPORT_MS = 2000;

  @Env('how long the example `approve_refund` checks the order before asking the approver')
  @IntEnv(0, 60000)
  EXAMPLE_APPROVAL_CHECK_MS = 500;

  @Env(
    'base URL of the service the example `lookup_customer` calls (`GET <url>/customers/<id>`); unset: the ' +
      'tool answers "not configured"',
    { type: 'http(s) URL' },
  )
  @IsOptional()
  @Matches(HTTP_URL, { message: 'EXAMPLE_HTTP_BASE_URL must be an http(s) URL without query or fragment' })
  EXAMPLE_HTTP_BASE_URL?: string;

  @Env('bearer secret sent to that service (≥ 8 characters); never logged or returned to the model', {
    type: 'secret',
  })
  @IsOptional()
  @MinLength(8, { message: 'EXAMPLE_HTTP_SECRET must be at least 8 characters' })
  @MaxLength(4096, { message: 'EXAMPLE_HTTP_SECRET must be at most 4096 characters' })
  EXAMPLE_HTTP_SECRET?: string;

  @Env('timeout of each attempt of `lookup_customer`')
  @IntEnv(100, 120000)
  EXAMPLE_HTTP_TIMEOUT_MS = 5000;

  @Env('retries after a 5xx answer, a timeout or a network error (never after a 4xx)')
  @IntEnv(0, 10)
  EXAMPLE_HTTP_RETRIES = 2;

  @Env('first wait between retries, doubled each time')
  @IntEnv(0, 60000)
  EXAMPLE_HTTP_BACKOFF_MS = 200;
}
