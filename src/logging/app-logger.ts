import type { LoggerService } from '@nestjs/common';
import { LOG_LEVELS, type LogLevelName } from '../config/app-config.js';
import { currentRequestId } from './request-context.js';

type Level = LogLevelName;

const RANK: Record<Level, number> = Object.fromEntries(LOG_LEVELS.map((l, i) => [l, i])) as Record<
  Level,
  number
>;

export interface AppLoggerOptions {
  json: boolean;
  level: Level;
  write?: (line: string) => void;
}

/**
 * JSON lines in production, readable lines elsewhere; the request's correlation id on every line.
 * Callers log messages and ids, never tokens or request bodies.
 */
export class AppLogger implements LoggerService {
  private readonly write: (line: string) => void;

  constructor(private readonly opts: AppLoggerOptions) {
    this.write = opts.write ?? ((line) => process.stdout.write(line + '\n'));
  }

  private emit(level: Level, message: unknown, rest: unknown[]): void {
    if (RANK[level] > RANK[this.opts.level]) return;
    // Nest passes the context as the last string argument and, for errors, a stack before it.
    const args = [...rest];
    const context = typeof args[args.length - 1] === 'string' ? (args.pop() as string) : undefined;
    const stack =
      level === 'error' || level === 'fatal' ? args.find((a) => typeof a === 'string') : undefined;
    const text =
      message instanceof Error
        ? message.message
        : typeof message === 'string'
          ? message
          : JSON.stringify(message);
    const requestId = currentRequestId();
    const time = new Date().toISOString();
    if (this.opts.json) {
      const line: Record<string, unknown> = { time, level, msg: text };
      if (context) line.context = context;
      if (requestId) line.requestId = requestId;
      if (stack) line.stack = stack;
      else if (message instanceof Error && message.stack) line.stack = message.stack;
      this.write(JSON.stringify(line));
    } else {
      const rid = requestId ? ` [${requestId}]` : '';
      const ctx = context ? ` [${context}]` : '';
      const extra = typeof stack === 'string' ? `\n${stack}` : '';
      this.write(`${time} ${level.toUpperCase().padEnd(7)}${ctx}${rid} ${text}${extra}`);
    }
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
