import { DomainError } from '../common/domain-error.js';
import { registerErrorMapper } from '../common/error-mappers.js';
import { mapQuotaError } from '../quotas/quota.error-mapper.js';
import { QuotaErrorCode, QuotaExceededError } from '../quotas/quota.errors.js';
import { mapSessionError } from '../sessions/sessions.error-mapper.js';
import { SessionError, SessionErrorCode } from '../sessions/sessions.errors.js';
import { mapTaskError } from '../tasks/mcp/tasks.error-mapper.js';
import { TaskError } from '../tasks/tasks.errors.js';
import { McpProtocolError } from '../tool-dispatch/tool-context.js';
import { mapToolDispatchError } from '../tool-dispatch/tool-dispatch.error-mapper.js';
import { ToolDispatchError, ToolDispatchErrorCode } from '../tool-dispatch/tool-dispatch.errors.js';
import { mapError } from './error-mapping.js';
import { ProtocolError } from './protocol.errors.js';

class UnmappedError extends DomainError<'X'> {}

describe('mapError', () => {
  beforeAll(() => {
    // What the feature modules do in onModuleInit.
    registerErrorMapper(TaskError, mapTaskError);
    registerErrorMapper(SessionError, mapSessionError);
    registerErrorMapper(QuotaExceededError, mapQuotaError);
    registerErrorMapper(ToolDispatchError, mapToolDispatchError);
  });

  it('answers wire errors as they are', () => {
    expect(mapError(ProtocolError.headerMismatch('x'), 'modern')).toEqual({
      error: { code: -32020, message: 'Header mismatch: x' },
      httpStatus: 400,
    });
    expect(mapError(new McpProtocolError(-32042, 'nope', { a: 1 }), 'legacy')).toEqual({
      error: { code: -32042, message: 'nope', data: { a: 1 } },
      httpStatus: 200,
    });
  });

  it('maps each domain error through its feature mapper', () => {
    expect(mapError(TaskError.notFound(), 'legacy')).toEqual({
      error: { code: -32602, message: 'Task not found' },
      httpStatus: 200,
    });
    expect(mapError(new SessionError(SessionErrorCode.SESSION_NOT_FOUND, 'gone'), 'legacy')).toEqual({
      error: { code: -32001, message: 'Session not found' },
      httpStatus: 404,
    });
    const quota = new QuotaExceededError(
      QuotaErrorCode.TOO_MANY,
      'principal_rate',
      'slow down',
      5,
      'RATE',
      2,
    );
    expect(mapError(quota, 'modern')).toEqual({
      error: {
        code: -32000,
        message: 'slow down',
        data: { quota: 'principal_rate', limit: 5, setting: 'RATE', retryAfterSeconds: 2 },
      },
      httpStatus: 429,
    });
    const missing = new ToolDispatchError(ToolDispatchErrorCode.RESOURCE_NOT_FOUND, 'no', { uri: 'u' });
    expect(mapError(missing, 'legacy').error.code).toBe(-32002);
    expect(mapError(missing, 'modern').error.code).toBe(-32602);
  });

  it('answers a domain error without a mapper as an internal error', () => {
    const mapped = mapError(new UnmappedError('X', 'secret detail'), 'modern');
    expect(mapped.error.code).toBe(-32603);
    expect(mapped.error.message).not.toContain('secret');
  });
});
