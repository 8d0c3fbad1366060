import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import { AppLogger } from './app-logger.js';
import { requestContext } from './request-context.js';

describe('AppLogger', () => {
  it('says which levels it writes, so a caller can skip building a line it would drop', () => {
    const lines: string[] = [];
    const logger = new AppLogger({ json: false, level: 'log', write: (l) => lines.push(l) });
    expect(['fatal', 'error', 'warn', 'log'].map((l) => logger.isLevelEnabled(l as 'log'))).toEqual([
      true,
      true,
      true,
      true,
    ]);
    expect(logger.isLevelEnabled('debug')).toBe(false);
    expect(logger.isLevelEnabled('verbose')).toBe(false);
    logger.debug('dropped');
    logger.log('kept');
    expect(lines).toHaveLength(1);
    expect(new AppLogger({ json: false, level: 'verbose' }).isLevelEnabled('debug')).toBe(true);
  });

  it('writes pino JSON lines carrying the request and principal ids of the current request', () => {
    const lines: string[] = [];
    const logger = new AppLogger({ json: true, level: 'log', write: (l) => lines.push(l) });
    requestContext.run({ requestId: 'req-42', principalId: 'apikey:ops' }, () => logger.log('hello', 'Ctx'));
    logger.warn('outside');
    const first = JSON.parse(lines[0]);
    expect(first).toMatchObject({
      level: 'info',
      msg: 'hello',
      context: 'Ctx',
      request_id: 'req-42',
      principal_id: 'apikey:ops',
    });
    expect(Number.isNaN(Date.parse(first.time))).toBe(false);
    const second = JSON.parse(lines[1]);
    expect(second.level).toBe('warn');
    expect(second.request_id).toBeUndefined();
    expect(second.trace_id).toBeUndefined();
  });

  it('adds trace_id and span_id of the active span', () => {
    const contextManager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(contextManager);
    const provider = new BasicTracerProvider();
    try {
      const lines: string[] = [];
      const logger = new AppLogger({ json: true, level: 'log', write: (l) => lines.push(l) });
      const span = provider.getTracer('test').startSpan('work');
      context.with(trace.setSpan(context.active(), span), () => logger.log('inside a span'));
      span.end();
      expect(JSON.parse(lines[0])).toMatchObject({
        trace_id: span.spanContext().traceId,
        span_id: span.spanContext().spanId,
      });
    } finally {
      context.disable();
    }
  });

  it('drops lines below the configured level', () => {
    const lines: string[] = [];
    const logger = new AppLogger({ json: false, level: 'warn', write: (l) => lines.push(l) });
    logger.log('quiet');
    logger.debug('quieter');
    logger.error('loud', undefined, 'Ctx');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/ERROR\s+\[Ctx\] loud/);
  });

  it('puts a stack on error lines in JSON mode', () => {
    const lines: string[] = [];
    const logger = new AppLogger({ json: true, level: 'log', write: (l) => lines.push(l) });
    logger.error('boom', 'Error: boom\n    at x', 'Ctx');
    expect(JSON.parse(lines[0])).toMatchObject({
      level: 'error',
      msg: 'boom',
      stack: 'Error: boom\n    at x',
    });
  });

  it('keeps secrets out of messages, stacks and logged objects, in both formats', () => {
    const secrets = [
      's3cr3t-pg-pass',
      'eyJhbGciOiJSUzI1NiJ9.payload.sig',
      'mcpk_ABCDEF_zzzzSECRETzzzz',
      'hunter2',
    ];
    for (const json of [true, false]) {
      const lines: string[] = [];
      const logger = new AppLogger({ json, level: 'verbose', write: (l) => lines.push(l) });
      logger.warn('connect to postgres://app:s3cr3t-pg-pass@db:5432/mcp failed', 'Db');
      logger.log('forwarding Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.payload.sig', 'Auth');
      logger.error(
        'refused key mcpk_ABCDEF_zzzzSECRETzzzz',
        'Error: refused\n    at login (password=hunter2)',
        'Auth',
      );
      logger.debug({
        headers: { authorization: 'Bearer eyJhbGciOiJSUzI1NiJ9.payload.sig' },
        password: 'hunter2',
      });
      const out = lines.join('\n');
      for (const s of secrets) expect(out).not.toContain(s);
      expect(out).toContain('[REDACTED]');
      expect(lines).toHaveLength(4);
    }
  });
});
