import { applyDecorators } from '@nestjs/common';
import { Transform } from 'class-transformer';
import {
  IsBoolean,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
} from 'class-validator';

/**
 * The whole environment schema. Every variable the service reads is declared here, once, with its
 * default; nothing else in the code reads process.env. README's configuration table mirrors this class.
 */

const toInt = ({ value }: { value: unknown }): unknown =>
  typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value.trim()) : value;

const toBool = ({ value }: { value: unknown }): unknown => {
  if (typeof value !== 'string') return value;
  const v = value.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(v)) return true;
  if (['false', '0', 'no', 'off'].includes(v)) return false;
  return value;
};

const toList = ({ value }: { value: unknown }): unknown =>
  typeof value === 'string'
    ? value
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s.length > 0)
    : value;

export const AUTH_PROVIDER_NAMES = ['oidc', 'proxy', 'apikey'] as const;
export type AuthProviderName = (typeof AUTH_PROVIDER_NAMES)[number];

/** Asymmetric JWS algorithms only: `none` and HMAC (a shared secret) can never verify an access token here. */
export const ASYMMETRIC_JWT_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;

const HEADER_NAME = /^[a-z0-9!#$%&'*+.^_`|~-]+$/;
const toHeaderName = ({ value }: { value: unknown }): unknown =>
  typeof value === 'string' ? value.trim().toLowerCase() : value;
const HTTP_URL = /^https?:\/\/[^\s/?#]+(\/[^\s?#]*)?$/;

/** An integer variable within [min, max]; the message names the variable (class-validator's $property). */
function IntEnv(min: number, max: number): PropertyDecorator {
  const message = `$property must be an integer between ${min} and ${max}`;
  return applyDecorators(Transform(toInt), IsInt({ message }), Min(min, { message }), Max(max, { message }));
}

/** A comma-separated list; blanks around items are dropped. */
function ListEnv(): PropertyDecorator {
  return applyDecorators(Transform(toList), IsString({ each: true }));
}

/** A boolean variable: true/false, 1/0, yes/no, on/off. */
function BoolEnv(): PropertyDecorator {
  return applyDecorators(Transform(toBool), IsBoolean({ message: '$property must be true or false' }));
}

export const STATEMENT_MODE_SETTINGS = ['auto', 'named', 'unnamed'] as const;
export type StatementModeSetting = (typeof STATEMENT_MODE_SETTINGS)[number];

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'log', 'debug', 'verbose'] as const;
export type LogLevelName = (typeof LOG_LEVELS)[number];

export const TRACES_EXPORTERS = ['none', 'otlp', 'console'] as const;
export type TracesExporter = (typeof TRACES_EXPORTERS)[number];

export class AppConfig {
  @IntEnv(0, 65535)
  PORT = 3000;

  @IsString()
  @Matches(/^[A-Za-z0-9.:[\]-]+$/, { message: 'HOST must be a host name or IP address' })
  HOST = '127.0.0.1';

  @IsOptional()
  @Matches(/^postgres(ql)?:\/\/\S+$/, { message: 'DATABASE_URL must be a postgres:// or postgresql:// URL' })
  DATABASE_URL?: string;

  /**
   * A direct (unpooled) URL for the one LISTEN connection. Behind PgBouncer in transaction mode LISTEN does
   * not survive the transaction, so DATABASE_URL may point at the pooler while this points past it.
   */
  @IsOptional()
  @Matches(/^postgres(ql)?:\/\/\S+$/, {
    message: 'DATABASE_LISTEN_URL must be a postgres:// or postgresql:// URL',
  })
  DATABASE_LISTEN_URL?: string;

  @IsString()
  DATA_DIR = './.data';

  @IsIn(LOG_LEVELS, { message: `LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}` })
  LOG_LEVEL: LogLevelName = 'log';

  @IsIn(['development', 'production', 'test'], {
    message: 'NODE_ENV must be one of development, production, test',
  })
  NODE_ENV: 'development' | 'production' | 'test' = 'development';

  @BoolEnv()
  DB_MIGRATIONS_RUN = true;

  @IntEnv(1, 200)
  DB_POOL_MAX = 10;

  /**
   * How the hot statements are sent: `auto` finds out at boot (and at the first lost statement) whether the
   * pool keeps named prepared statements, which a transaction-mode pooler such as PgBouncer < 1.21 does not;
   * `named` or `unnamed` forces one (see docs/operations.md, Supported topologies).
   */
  @IsIn(STATEMENT_MODE_SETTINGS, {
    message: `DB_PREPARED_STATEMENTS must be one of ${STATEMENT_MODE_SETTINGS.join(', ')}`,
  })
  DB_PREPARED_STATEMENTS: StatementModeSetting = 'auto';

  @Matches(/^\d+(\.\d+)?\s*(b|kb|mb)?$/i, {
    message: 'HTTP_BODY_LIMIT must be a size such as 4mb, 512kb or 1048576',
  })
  HTTP_BODY_LIMIT = '4mb';

  @IntEnv(0, 600000)
  SHUTDOWN_GRACE_MS = 10000;

  /**
   * After SIGTERM, how long readiness is 503 while requests are still served (each connection closed after
   * its answer), before new connections are refused and the grace period starts. Longer than the balancer's
   * idle keep-alive to the instances (nginx keepalive_timeout 2 s in deploy/nginx) and its readiness period.
   */
  @IntEnv(0, 600000)
  SHUTDOWN_DRAIN_DELAY_MS = 3000;

  @IntEnv(100, 60000)
  HEALTH_DB_TIMEOUT_MS = 2000;

  /** Comma-separated list of allowed browser origins; empty means CORS stays off. */
  @ListEnv()
  @Matches(/^https?:\/\/[^\s/]+$/, {
    each: true,
    message: 'CORS_ORIGINS must be a comma list of http(s) origins',
  })
  CORS_ORIGINS: string[] = [];

  /** Lets an operator opt in to `useradd postgres` when the embedded database runs as root on a bare host. */
  @BoolEnv()
  EMBEDDED_PG_CREATE_USER = false;

  @IntEnv(1000, 600000)
  INSTANCE_HEARTBEAT_MS = 10000;

  /** How often the LISTEN connection proves itself with a self-NOTIFY round trip. */
  @IntEnv(200, 600000)
  BUS_HEARTBEAT_MS = 5000;

  /** How long that round trip (and a reconnect of the LISTEN connection) may take before it counts as failed. */
  @IntEnv(100, 60000)
  BUS_HEARTBEAT_TIMEOUT_MS = 3000;

  /** Idle time before TCP keepalive probes start on the LISTEN connection. */
  @IntEnv(1000, 600000)
  BUS_TCP_KEEPALIVE_MS = 10000;

  /** Which authentication providers are active (comma list). Empty: the anonymous development principal. */
  @Transform(toList)
  @IsIn(AUTH_PROVIDER_NAMES, {
    each: true,
    message: `AUTH_PROVIDERS must be a comma list of ${AUTH_PROVIDER_NAMES.join(', ')}`,
  })
  AUTH_PROVIDERS: AuthProviderName[] = [];

  /** The canonical URL of the /mcp endpoint: the resource tokens are issued for (RFC 8707) and RFC 9728 names. */
  @IsOptional()
  @Matches(HTTP_URL, { message: 'MCP_RESOURCE_URL must be an http(s) URL without query or fragment' })
  MCP_RESOURCE_URL?: string;

  @IsOptional()
  @Matches(HTTP_URL, { message: 'OIDC_ISSUER must be an http(s) URL without query or fragment' })
  OIDC_ISSUER?: string;

  @IsOptional()
  @Matches(/^https?:\/\/\S+$/, { message: 'OIDC_JWKS_URI must be an http(s) URL' })
  OIDC_JWKS_URI?: string;

  /** Accepted `aud` values (comma list); defaults to MCP_RESOURCE_URL. */
  @ListEnv()
  OIDC_AUDIENCE: string[] = [];

  @Transform(toList)
  @IsIn(ASYMMETRIC_JWT_ALGORITHMS, {
    each: true,
    message: `OIDC_ALGORITHMS must be a comma list of ${ASYMMETRIC_JWT_ALGORITHMS.join(', ')} (never none or HS*)`,
  })
  // Ed25519 is the newer name of an EdDSA curve; the default keeps the registered names only.
  OIDC_ALGORITHMS: string[] = ASYMMETRIC_JWT_ALGORITHMS.filter((a) => a !== 'Ed25519');

  @IntEnv(0, 300)
  OIDC_CLOCK_SKEW_S = 60;

  /**
   * When set (only `at+jwt`, RFC 9068), a token whose JOSE `typ` header is not `at+jwt` (or
   * `application/at+jwt`) is refused: an ID token from the same issuer cannot be used as an access token.
   */
  @IsOptional()
  @Transform(({ value }: { value: unknown }) =>
    typeof value === 'string'
      ? value
          .trim()
          .toLowerCase()
          .replace(/^application\//, '')
      : value,
  )
  @IsIn(['at+jwt'], { message: 'OIDC_REQUIRED_TYP must be at+jwt (RFC 9068) or unset' })
  OIDC_REQUIRED_TYP?: 'at+jwt';

  /** Least time between two JWKS fetches caused by tokens with an unknown `kid`. */
  @IntEnv(0, 3600000)
  OIDC_JWKS_COOLDOWN_MS = 30000;

  /** How long fetched keys are used before the JWKS is fetched again. */
  @IntEnv(1000, 86400000)
  OIDC_JWKS_CACHE_MS = 600000;

  @Transform(toHeaderName)
  @Matches(HEADER_NAME, { message: 'AUTH_PROXY_USER_HEADER must be an HTTP header name' })
  AUTH_PROXY_USER_HEADER = 'x-forwarded-user';

  @Transform(toHeaderName)
  @Matches(HEADER_NAME, { message: 'AUTH_PROXY_EMAIL_HEADER must be an HTTP header name' })
  AUTH_PROXY_EMAIL_HEADER = 'x-forwarded-email';

  @Transform(toHeaderName)
  @Matches(HEADER_NAME, { message: 'AUTH_PROXY_GROUPS_HEADER must be an HTTP header name' })
  AUTH_PROXY_GROUPS_HEADER = 'x-forwarded-groups';

  /** Shared secret the SSO proxy sends in `x-auth-proxy-secret`; without it proxy headers are not trusted. */
  @IsOptional()
  @MinLength(16, { message: 'AUTH_PROXY_SECRET must be at least 16 characters' })
  AUTH_PROXY_SECRET?: string;

  /** Scopes every proxy-authenticated principal holds (the proxy itself carries none). */
  @ListEnv()
  AUTH_PROXY_SCOPES: string[] = [];

  /** Advertised in the RFC 9728 document and, when AUTH_REQUIRED_SCOPES is empty, in 401 challenges. */
  @ListEnv()
  AUTH_SCOPES_SUPPORTED: string[] = [];

  /** Scopes every authenticated request to /mcp needs; a principal without them gets 403 insufficient_scope. */
  @ListEnv()
  AUTH_REQUIRED_SCOPES: string[] = [];

  /** When set, GET /metrics needs `Authorization: Bearer <METRICS_TOKEN>`. A bearer secret: at least 16 characters. */
  @IsOptional()
  @MinLength(16, { message: 'METRICS_TOKEN must be at least 16 characters' })
  @MaxLength(512, { message: 'METRICS_TOKEN must be at most 512 characters' })
  METRICS_TOKEN?: string;

  /**
   * Serves /metrics without METRICS_TOKEN in production (for a scraper on a private network). Outside
   * production an unset METRICS_TOKEN already leaves /metrics open; this only silences the boot refusal.
   */
  @BoolEnv()
  METRICS_PUBLIC = false;

  /** Registers the MCP conformance fixtures (src/tools/conformance); for conformance runs, never production. */
  @BoolEnv()
  MCP_CONFORMANCE_FIXTURES = false;

  /** Registers the benchmark tools echo, echo_task and echo_task_required (src/tools/bench); for bench/ only. */
  @BoolEnv()
  MCP_BENCH_TOOLS = false;

  /**
   * Registers the example tool modules of src/tools/examples (report job, approval flow, outbound HTTP).
   * Unset: on outside production, off when NODE_ENV=production (loadConfig decides).
   */
  @BoolEnv()
  EXAMPLE_TOOLS = true;

  /** Duration of one step of the example report job (`generate_report`); tests set it to a few ms. */
  @IntEnv(0, 600000)
  EXAMPLE_REPORT_STEP_MS = 5000;

  /** How long the example approval flow (`approve_refund`) "checks the order" before asking the approver. */
  @IntEnv(0, 60000)
  EXAMPLE_APPROVAL_CHECK_MS = 500;

  /** Base URL of the service the example outbound-HTTP tool calls; unset: the tool answers "not configured". */
  @IsOptional()
  @Matches(HTTP_URL, { message: 'EXAMPLE_HTTP_BASE_URL must be an http(s) URL without query or fragment' })
  EXAMPLE_HTTP_BASE_URL?: string;

  /** Bearer secret the example outbound-HTTP tool sends; never logged, never returned to the model. */
  @IsOptional()
  @MinLength(8, { message: 'EXAMPLE_HTTP_SECRET must be at least 8 characters' })
  @MaxLength(4096, { message: 'EXAMPLE_HTTP_SECRET must be at most 4096 characters' })
  EXAMPLE_HTTP_SECRET?: string;

  /** Timeout of one attempt of the example outbound-HTTP tool. */
  @IntEnv(100, 120000)
  EXAMPLE_HTTP_TIMEOUT_MS = 5000;

  /** Retries after a 5xx answer or a network error (never after a 4xx). */
  @IntEnv(0, 10)
  EXAMPLE_HTTP_RETRIES = 2;

  /** First backoff between retries; doubled at each retry. */
  @IntEnv(0, 60000)
  EXAMPLE_HTTP_BACKOFF_MS = 200;

  @IntEnv(1000, 604800000)
  SESSION_IDLE_TTL_MS = 30 * 60 * 1000;

  /**
   * Handshake-era sessions this instance keeps in memory between requests (0: read every request's session
   * from the database). An entry is re-read after 5 s, dropped at once when any instance changes or ends
   * the session, and ignored while this instance's LISTEN connection is not healthy.
   */
  @IntEnv(0, 1000000)
  SESSION_CACHE_MAX = 10000;

  /**
   * Finished tasks an instance keeps in memory after a read, until their ttl runs out (a finished task does
   * not change, and nothing deletes it before its ttl + TASK_EXPIRED_GRACE_MS), so polls and tasks/result
   * after the end need no database read (0: none kept).
   */
  @IntEnv(0, 1000000)
  FINISHED_TASK_CACHE_MAX = 10000;

  /** Memory those finished tasks may take, in bytes (approximate JSON size); a task over 1/64 of it is not kept. */
  @IntEnv(0, 1073741824)
  FINISHED_TASK_CACHE_BYTES = 33554432;

  @IntEnv(10, 100000)
  SSE_STREAM_RETENTION = 1000;

  @IntEnv(1000, 604800000)
  SSE_EVENT_TTL_MS = 60 * 60 * 1000;

  @IntEnv(1000, 15000)
  SSE_KEEPALIVE_MS = 15000;

  @IntEnv(0, 60000)
  SSE_RETRY_MS = 1000;

  @IntEnv(1000, 3600000)
  CLIENT_REQUEST_TIMEOUT_MS = 5 * 60 * 1000;

  /**
   * Host names (with optional :port) accepted in the Host header of /mcp requests. Empty: when bound to a
   * loopback address only localhost, 127.0.0.1 and [::1] are accepted; otherwise any host.
   */
  @ListEnv()
  MCP_ALLOWED_HOSTS: string[] = [];

  /** Browser origins accepted on /mcp. Empty: loopback origins only when bound to loopback, else none. */
  @ListEnv()
  MCP_ALLOWED_ORIGINS: string[] = [];

  /** HMAC key for MRTR requestState; must be the same on every instance. Unset: random per process. */
  @IsOptional()
  @IsString()
  @Matches(/^.{32,}$/, { message: 'MRTR_STATE_SECRET must be at least 32 characters' })
  MRTR_STATE_SECRET?: string;

  @IntEnv(1000, 86400000)
  MRTR_STATE_TTL_MS = 10 * 60 * 1000;

  @IntEnv(0, 86400000)
  LIST_CACHE_TTL_MS = 60000;
  /** Live (working or input_required) tasks one owner may hold; finished tasks do not count. */
  @IntEnv(1, 1000000)
  TASK_MAX_PER_OWNER = 100;

  /** Live tasks across all owners and instances. */
  @IntEnv(1, 100000000)
  TASK_MAX_TOTAL = 10000;

  /** Upper bound for a granted task ttl (retention from creation). */
  @IntEnv(1000, 2147483647)
  TASK_MAX_TTL_MS = 86400000;

  /** ttl granted when the client asks for none (clamped to TASK_MAX_TTL_MS). */
  @IntEnv(1000, 2147483647)
  TASK_DEFAULT_TTL_MS = 3600000;

  /** Poll hint (pollInterval / pollIntervalMs) given to clients. */
  @IntEnv(100, 3600000)
  TASK_POLL_INTERVAL_MS = 1000;

  /** Longest a blocking tasks/result waits for a terminal state. */
  @IntEnv(1000, 3600000)
  TASK_RESULT_TIMEOUT_MS = 300000;

  /** 2026-07-28: how long an escalatable call runs inline before it becomes a task. */
  @IntEnv(0, 60000)
  TASK_INLINE_WINDOW_MS = 100;

  /** Lease of a running task; its instance renews it every third of this. A lapsed lease fails the task. */
  @IntEnv(1000, 3600000)
  TASK_LEASE_MS = 30000;

  /**
   * Most task creations, or most worker outcomes, that one instance commits in one transaction when they
   * arrive while the previous group is still in flight (group commit; 1 turns it off). See docs/architecture.md.
   */
  @IntEnv(1, 1000)
  TASK_COMMIT_GROUP_MAX = 64;

  /** lock_timeout of every task transaction, so a stuck lock surfaces as an error instead of a hang. */
  @IntEnv(100, 60000)
  TASK_LOCK_TIMEOUT_MS = 5000;

  /**
   * Least time between two statusMessage writes from one task's progress updates (the latest message wins;
   * see README "Failure behaviour").
   */
  @IntEnv(0, 3600000)
  TASK_PROGRESS_WRITE_MS = 1000;

  /**
   * How long a worker keeps retrying its final write (complete, fail, input round) that the database cannot
   * take (lock timeout, reset connection, restart or failover), with backoff up to 2 s between attempts.
   */
  @IntEnv(0, 86400000)
  TASK_WRITE_RETRY_MS = 300000;

  /** How long a finished task stays readable after created + ttl before the janitor deletes it. */
  @IntEnv(0, 86400000)
  TASK_EXPIRED_GRACE_MS = 60000;

  /** Tasks per tasks/list page. */
  @IntEnv(1, 1000)
  TASK_LIST_PAGE_SIZE = 50;

  /** input_required rounds one task may go through; one more fails the task. */
  @IntEnv(1, 1000)
  TASK_MAX_INPUT_ROUNDS = 10;

  /** Input requests in one input_required round; more fails the task. */
  @IntEnv(1, 1000)
  TASK_MAX_INPUT_KEYS = 50;

  /** Largest saved handler state (JSON bytes) across an input_required round; larger fails the task. */
  @IntEnv(0, 16777216)
  TASK_MAX_HANDLER_STATE_BYTES = 65536;

  /** How often the janitor sweeps (one instance at a time). */
  @IntEnv(1000, 86400000)
  JANITOR_INTERVAL_MS = 60000;

  /** Rows the janitor touches per transaction. */
  @IntEnv(1, 100000)
  JANITOR_BATCH_SIZE = 100;

  /**
   * While it has a backlog, the share of wall time (percent) the janitor spends in its batches: after each
   * full batch it pauses so that batch time / (batch time + pause) stays at this. Lower protects live
   * traffic, higher clears a backlog sooner. Each step of a run continues at most JANITOR_INTERVAL_MS.
   */
  @IntEnv(1, 100)
  JANITOR_DUTY_PERCENT = 10;

  /** Run the periodic janitor on this instance (startup recovery runs regardless). */
  @BoolEnv()
  JANITOR_ENABLED = true;

  /**
   * Tracing is off unless this names an exporter (otlp: OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT; console:
   * spans on stdout). The other standard OTEL_* variables (endpoint, headers, sampler, service name) are read
   * by the OpenTelemetry SDK itself; only the on/off decision lives here.
   */
  @IsIn(TRACES_EXPORTERS, { message: `OTEL_TRACES_EXPORTER must be one of ${TRACES_EXPORTERS.join(', ')}` })
  OTEL_TRACES_EXPORTER: TracesExporter = 'none';

  /** service.name of the spans (the standard variable; our default instead of the SDK's unknown_service). */
  @IsString()
  @Matches(/^\S{1,128}$/, { message: 'OTEL_SERVICE_NAME must be 1 to 128 non-space characters' })
  OTEL_SERVICE_NAME = 'mcp-task-server';

  /** The standard kill switch: true turns tracing off whatever OTEL_TRACES_EXPORTER says. */
  @BoolEnv()
  OTEL_SDK_DISABLED = false;

  get tracingEnabled(): boolean {
    return !this.OTEL_SDK_DISABLED && this.OTEL_TRACES_EXPORTER !== 'none';
  }

  // ---- Quotas and rate limits (README "Limits and quotas"). Counts are per instance unless noted; 0 turns
  // a rate limit off.

  /** Requests per second one principal may make on /mcp (token bucket refill, per instance). 0: no limit. */
  @IntEnv(0, 1000000)
  RATE_LIMIT_PRINCIPAL_RPS = 200;

  /** Requests one principal may make at once on top of the rate (token bucket size). */
  @IntEnv(1, 10000000)
  RATE_LIMIT_PRINCIPAL_BURST = 2000;

  /** Requests per second one client address may make on /mcp, counted before authentication. 0: no limit. */
  @IntEnv(0, 1000000)
  RATE_LIMIT_ADDRESS_RPS = 500;

  /** Burst of the per-address bucket. */
  @IntEnv(1, 10000000)
  RATE_LIMIT_ADDRESS_BURST = 5000;

  /** Live handshake-era sessions one principal may hold (exact: counted in the database). */
  @IntEnv(1, 10000000)
  QUOTA_SESSIONS_PER_PRINCIPAL = 1000;

  /** Open SSE streams one principal may hold on this instance: GET, subscriptions/listen and SSE answers. */
  @IntEnv(1, 10000000)
  QUOTA_STREAMS_PER_PRINCIPAL = 500;

  /** POSTed requests one principal may have in flight on this instance (a listen counts as a stream). */
  @IntEnv(1, 10000000)
  QUOTA_IN_FLIGHT_PER_PRINCIPAL = 500;

  /** Blocked tasks/result calls one principal may have waiting on this instance. */
  @IntEnv(1, 10000000)
  QUOTA_RESULT_WAITERS_PER_PRINCIPAL = 200;

  /** resources/subscribe entries one session may hold. */
  @IntEnv(1, 1000000)
  QUOTA_SUBSCRIPTIONS_PER_SESSION = 1000;

  /** Largest request params (JSON bytes) stored with a task. */
  @IntEnv(1024, 1073741824)
  QUOTA_TASK_PARAMS_BYTES = 1048576;

  /** Largest task result (JSON bytes); a larger one fails the task with an error naming this quota. */
  @IntEnv(1024, 1073741824)
  QUOTA_TASK_RESULT_BYTES = 4194304;

  /** Largest inputResponses (JSON bytes) of one tasks/update. */
  @IntEnv(1024, 1073741824)
  QUOTA_TASK_INPUT_BYTES = 1048576;

  /** Largest clientInfo plus capabilities (JSON bytes) stored with a session. */
  @IntEnv(256, 16777216)
  QUOTA_SESSION_CLIENT_BYTES = 65536;

  /**
   * JSON bytes of client answers one session may have parked at once: answers to server-to-client requests
   * (elicitation, sampling, roots) that arrived at another instance than the one waiting, kept until it
   * takes them. Only answers to requests the session has outstanding are stored at all.
   */
  @IntEnv(1024, 1073741824)
  QUOTA_CLIENT_RESPONSE_BYTES_PER_SESSION = 4194304;

  // The shape of every JSON body, checked on its bytes before it is parsed (README "Limits and quotas"): far
  // above what real clients send, low enough that parsing, validating and serialising stay cheap. A body
  // beyond one is refused with -32602 (HTTP 400) naming the variable.

  /** Deepest nesting of objects and arrays. */
  @IntEnv(8, 10000)
  JSON_MAX_DEPTH = 64;

  /** Most keys in any one object. */
  @IntEnv(16, 10000000)
  JSON_MAX_OBJECT_KEYS = 1000;

  /** Most values in one body, counting every object, array, string, number, boolean and null. */
  @IntEnv(1000, 100000000)
  JSON_MAX_NODES = 100000;

  /** Finished tasks one owner may keep before new ones are refused (exact; the janitor frees them at expiry). */
  @IntEnv(1, 100000000)
  QUOTA_RETAINED_TASKS_PER_OWNER = 10000;

  get isProduction(): boolean {
    return this.NODE_ENV === 'production';
  }

  hasAuthProvider(name: AuthProviderName): boolean {
    return this.AUTH_PROVIDERS.includes(name);
  }

  /** The `aud` values an OIDC access token may carry: OIDC_AUDIENCE, or else MCP_RESOURCE_URL. */
  get oidcAudiences(): string[] {
    if (this.OIDC_AUDIENCE.length > 0) return this.OIDC_AUDIENCE;
    return this.MCP_RESOURCE_URL ? [this.MCP_RESOURCE_URL] : [];
  }

  /** HTTP_BODY_LIMIT in bytes. */
  get bodyLimitBytes(): number {
    const m = /^(\d+(?:\.\d+)?)\s*(b|kb|mb)?$/i.exec(this.HTTP_BODY_LIMIT);
    if (!m) return 4 * 1024 * 1024;
    const unit = (m[2] ?? 'b').toLowerCase();
    const mult = unit === 'mb' ? 1024 * 1024 : unit === 'kb' ? 1024 : 1;
    return Math.floor(Number(m[1]) * mult);
  }
}

/** The variables this schema knows, for the README table and for picking them out of the environment. */
export const CONFIG_KEYS = Object.keys(new AppConfig()).concat(
  'DATABASE_URL',
  'DATABASE_LISTEN_URL',
  'MCP_RESOURCE_URL',
  'OIDC_ISSUER',
  'OIDC_JWKS_URI',
  'AUTH_PROXY_SECRET',
  'METRICS_TOKEN',
  'EXAMPLE_HTTP_BASE_URL',
  'EXAMPLE_HTTP_SECRET',
  'OIDC_REQUIRED_TYP',
);
