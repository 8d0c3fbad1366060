import { SERVER_INFO } from '../../protocol/mcp-methods.service.js';
import { META } from '../../protocol/versions.js';
import type { TaskSnapshot } from '../task.types.js';
import { legacyTask, modernDetailedTask } from './task-wire.js';

const content = [{ type: 'text', text: 'done' }];

function snapshot(overrides: Partial<TaskSnapshot>): TaskSnapshot {
  const at = new Date('2026-12-04T12:00:00.000Z');
  return {
    id: 'task-1',
    ownerId: 'owner',
    sessionId: null,
    era: 'modern',
    toolName: 'slow_compute',
    status: 'working',
    statusMessage: null,
    createdAt: at,
    lastUpdatedAt: at,
    ttlMs: 60_000,
    expiresAt: new Date(at.getTime() + 60_000),
    pollIntervalMs: 500,
    requestParams: {},
    result: null,
    error: null,
    inputRequests: {},
    inputResponses: {},
    handlerState: null,
    inputRounds: 0,
    generation: 1,
    instanceId: null,
    leaseExpiresAt: null,
    traceContext: null,
    attempt: 1,
    failedAttempts: 0,
    maxAttempts: 1,
    resumable: false,
    availableAt: null,
    redrivenFrom: null,
    ...overrides,
  };
}

describe('task wire', () => {
  it('inlines a completed task’s result as the modern call answers it, resultType and server identity included', () => {
    const task = snapshot({ status: 'completed', result: { content, isError: false, _meta: { own: 1 } } });
    expect(modernDetailedTask(task).result).toEqual({
      resultType: 'complete',
      content,
      isError: false,
      _meta: { own: 1, [META.SERVER_INFO]: SERVER_INFO },
    });
  });

  it('inlines a tool error (isError) the same way: it is a completed call', () => {
    const task = snapshot({ status: 'completed', result: { content, isError: true } });
    expect(modernDetailedTask(task).result).toMatchObject({ resultType: 'complete', content, isError: true });
  });

  it('renders a failed task’s error and a legacy task without any resultType', () => {
    const failed = modernDetailedTask(
      snapshot({ status: 'failed', error: { code: -32603, message: 'boom' } }),
    );
    expect(failed).not.toHaveProperty('resultType');
    expect(failed.error).toEqual({ code: -32603, message: 'boom' });
    const legacy = legacyTask(snapshot({ era: 'legacy', status: 'completed', result: { content } }));
    expect(legacy).not.toHaveProperty('resultType');
    expect(legacy).not.toHaveProperty('result');
  });
});
