import { IsIn, IsString, Matches } from 'class-validator';
import { ConfigSection } from '../config/config-section.js';
import { BoolEnv, Env } from '../config/env.decorators.js';

export const TRACES_EXPORTERS = ['none', 'otlp', 'console'] as const;
export type TracesExporter = (typeof TRACES_EXPORTERS)[number];

/**
 * Tracing's on/off decision. The other standard OTEL_* variables (endpoint, headers, sampler) are read by
 * the OpenTelemetry SDK itself.
 */
@ConfigSection<TelemetryConfig>({ module: 'telemetry', summary: 'Tracing (OpenTelemetry).' })
export class TelemetryConfig {
  @Env(
    '`otlp` (OTLP/HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT`) or `console` (spans on stdout) turns tracing on (see ' +
      'observability); `none` keeps it off and the SDK unloaded',
    { type: TRACES_EXPORTERS.join(', ') },
  )
  @IsIn(TRACES_EXPORTERS, { message: `OTEL_TRACES_EXPORTER must be one of ${TRACES_EXPORTERS.join(', ')}` })
  OTEL_TRACES_EXPORTER: TracesExporter = 'none';

  @Env("`service.name` of exported spans (our default instead of the SDK's `unknown_service`)", {
    type: '1 to 128 non-space characters',
  })
  @IsString()
  @Matches(/^\S{1,128}$/, { message: 'OTEL_SERVICE_NAME must be 1 to 128 non-space characters' })
  OTEL_SERVICE_NAME = 'mcp-task-server';

  @Env('`true` turns tracing off whatever `OTEL_TRACES_EXPORTER` says (the standard kill switch)')
  @BoolEnv()
  OTEL_SDK_DISABLED = false;

  get tracingEnabled(): boolean {
    return !this.OTEL_SDK_DISABLED && this.OTEL_TRACES_EXPORTER !== 'none';
  }
}
