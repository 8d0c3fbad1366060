import type { TelemetryConfig } from './telemetry.config.js';

export interface TracingHandle {
  readonly enabled: boolean;
  /** Flushes buffered spans and stops the exporter (at shutdown). */
  shutdown(): Promise<void>;
}

const OFF: TracingHandle = { enabled: false, shutdown: async () => undefined };

/** Paths whose HTTP spans are noise: scrapes and probes arrive every few seconds from every scraper. */
const UNTRACED_PATHS = /^\/(metrics|health)(\/|$|\?)/i; // any case, as the router matches them

/**
 * Starts the OpenTelemetry SDK when tracing is on (TelemetryConfig.tracingEnabled), and does nothing otherwise:
 * no SDK module is even loaded, so tracing off costs nothing beyond the API's no-op spans.
 *
 * Must run before Nest, Express or pg are imported (main.ts imports them afterwards, dynamically): the
 * auto-instrumentations patch modules as they load. This app is ESM, so besides the CommonJS require hook the
 * SDK installs, the ESM loader hook of @opentelemetry/instrumentation is registered first; it wraps the
 * modules imported after it.
 *
 * Exporter, endpoint, headers, sampler, resource and batching come from the standard OTEL_* variables, read
 * by the SDK. Metrics stay on /metrics (Prometheus), so no OTel metric reader is set up. Logs: the SDK sets
 * up its log exporter from the standard variables too (OTEL_LOGS_EXPORTER, default `otlp`; `none` turns it
 * off); the only log records this server emits are the audit trail's rows (src/audit/audit-log-records.ts).
 */
export async function startTracing(config: TelemetryConfig): Promise<TracingHandle> {
  if (!config.tracingEnabled) return OFF;
  const { register } = await import('node:module');
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url);
  const [
    { NodeSDK },
    { HttpInstrumentation },
    { ExpressInstrumentation, ExpressLayerType },
    { PgInstrumentation },
  ] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-express'),
    import('@opentelemetry/instrumentation-pg'),
  ]);
  const sdk = new NodeSDK({
    serviceName: config.OTEL_SERVICE_NAME,
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (req) => UNTRACED_PATHS.test(req.url ?? ''),
      }),
      // Route and handler spans only: a span per middleware (request id, body parser, CORS…) is noise and cost.
      new ExpressInstrumentation({ ignoreLayersType: [ExpressLayerType.MIDDLEWARE] }),
      // requireParentSpan: pool pings and the LISTEN connection's traffic outside any request stay untraced.
      new PgInstrumentation({ requireParentSpan: true }),
    ],
    metricReaders: [],
  });
  sdk.start();
  return { enabled: true, shutdown: () => sdk.shutdown() };
}
