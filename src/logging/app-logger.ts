import type { LoggerService } from '@nestjs/common';
import { context, trace } from '@opentelemetry/api';
import { pino, type Logger as Pino } from 'pino';
import { LOG_LEVELS, type LogLevelName } from './logging.config.js';
import { redactSecrets, REDACTED_KEYS } from './redact.js';
import { requestContext } from './request-context.js';

type Level = LogLevelName;

const RANK: Record<Level, number> = Object.fromEntries(LOG_LEVELS.map((l, i) => [l, i])) as Record<
  Level,
  number
>;

/** Nest's level names as pino (and every log pipeline) knows them. */
const PINO_LEVEL = {
  fatal: 'fatal',
  error: 'error',
  warn: 'warn',
  log: 'info',
  debug: 'debug',
  verbose: 'trace',
} as const satisfies Record<Level, string>;

export interface AppLoggerOptions {
  json: boolean;
  level: Level;
  write?: (line: string) => void;
}

/** The correlation fields of the current request and span, on every line logged while they are active. */
function correlation(): Record<string, string> {
  const fields: Record<string, string> = {};
  const req = requestContext.getStore();
  if (req?.requestId) fields.request_id = req.requestId;
  if (req?.principalId) fields.principal_id = req.principalId;
  const span = trace.getSpanContext(context.active());
  if (span && trace.isSpanContextValid(span)) {
    fields.trace_id = span.traceId;
    fields.span_id = span.spanId;
  }
  return fields;
}

/**
 * Nest's LoggerService, writing JSON lines through pino in production and readable lines elsewhere. Every
 * line carries the request id, the principal id and the active trace and span ids; messages and stacks pass
 * through `redactSecrets`, and pino's `redact` covers secret-named keys of objects logged as messages.
 *
 * pino sits behind Nest's own logger rather than replacing it (nestjs-pino): every `new Logger(ctx)` in the
 * code keeps working unchanged, the correlation fields come from our own request context and the active
 * span instead of a second per-request logger, and the access line stays where app.setup.ts writes it.
 */
export class AppLogger implements LoggerService {
  private readonly write: (line: string) => void;
  private readonly pino: Pino | undefined;

  constructor(private readonly opts: AppLoggerOptions) {
    this.write = opts.write ?? ((line) => process.stdout.write(line + '\n'));
    if (opts.json) {
      const keys = [...REDACTED_KEYS, ...REDACTED_KEYS.map((k) => `data.${k}`)];
      const destination = opts.write
        ? { write: (chunk: string) => this.write(chunk.replace(/\n$/, '')) }
        : pino.destination({ dest: 1, sync: true });
      this.pino = pino(
        {
          level: 'trace', // LOG_LEVEL is applied before pino (emit), with Nest's level names
          base: undefined,
          messageKey: 'msg',
          timestamp: pino.stdTimeFunctions.isoTime,
          formatters: { level: (label) => ({ level: label }) },
          mixin: correlation,
          redact: { paths: keys, censor: '[REDACTED]' },
        },
        destination,
      );
    }
  }

  /** Whether a line of this level is written: callers skip building a line that would be dropped. */
  isLevelEnabled(level: Level): boolean {
    return RANK[level] <= RANK[this.opts.level];
  }

  private emit(level: Level, message: unknown, rest: unknown[]): void {
    if (!this.isLevelEnabled(level)) return;
    // Nest passes the context as the last string argument and, for errors, a stack before it.
    const args = [...rest];
    const ctx = typeof args[args.length - 1] === 'string' ? (args.pop() as string) : undefined;
    let stack = level === 'error' || level === 'fatal' ? args.find((a) => typeof a === 'string') : undefined;
    if (!stack && message instanceof Error) stack = message.stack;
    const text = redactSecrets(
      message instanceof Error
        ? message.message
        : typeof message === 'string'
          ? message
          : JSON.stringify(message),
    );
    if (this.pino) {
      const fields: Record<string, unknown> = {};
      if (ctx) fields.context = ctx;
      if (stack) fields.stack = redactSecrets(stack);
      if (typeof message === 'object' && message !== null && !(message instanceof Error)) {
        fields.data = message; // pino's redact paths cover its secret-named keys
        this.pino[PINO_LEVEL[level]](fields);
        return;
      }
      this.pino[PINO_LEVEL[level]](fields, text);
      return;
    }
    const fields = correlation();
    const rid = fields.request_id ? ` [${fields.request_id}]` : '';
    const c = ctx ? ` [${ctx}]` : '';
    const extra = stack ? `\n${redactSecrets(stack)}` : '';
    this.write(`${new Date().toISOString()} ${level.toUpperCase().padEnd(7)}${c}${rid} ${text}${extra}`);
  }

  log(message: unknown, ...rest: unknown[]): void {
    this.emit('log', message, rest);
  }
  error(message: unknown, ...rest: unknown[]): void {
    this.emit('error', message, rest);
  }
  warn(message: unknown, ...rest: unknown[]): void {
    this.emit('warn', message, rest);
  }
  debug(message: unknown, ...rest: unknown[]): void {
    this.emit('debug', message, rest);
  }
  verbose(message: unknown, ...rest: unknown[]): void {
    this.emit('verbose', message, rest);
  }
  fatal(message: unknown, ...rest: unknown[]): void {
    this.emit('fatal', message, rest);
  }
}
