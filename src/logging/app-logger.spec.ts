import { AppLogger } from './app-logger.js';
import { requestContext } from './request-context.js';

describe('AppLogger', () => {
  it('writes JSON lines carrying the request id of the current request', () => {
    const lines: string[] = [];
    const logger = new AppLogger({ json: true, level: 'log', write: (l) => lines.push(l) });
    requestContext.run({ requestId: 'req-42' }, () => logger.log('hello', 'Ctx'));
    logger.warn('outside');
    const first = JSON.parse(lines[0]);
    expect(first).toMatchObject({ level: 'log', msg: 'hello', context: 'Ctx', requestId: 'req-42' });
    expect(typeof first.time).toBe('string');
    expect(JSON.parse(lines[1]).requestId).toBeUndefined();
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
});
