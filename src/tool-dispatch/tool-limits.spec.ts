import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { bootToolRegistry, bootToolRegistryFailure } from '../../test/support/tool-registry-context.js';
import { McpTool, type ToolLimits } from './index.js';
import { limitKeyOf } from './tool-limits.js';

const INPUT = {
  type: 'object',
  properties: { repo: { type: 'string' }, count: { type: 'integer' }, note: { type: 'string' } },
  required: ['repo', 'count'],
};

/** A module with one tool declaring `limits` (and `taskSupport`). */
function moduleWith(limits: unknown, taskSupport: 'optional' | 'forbidden' = 'optional') {
  @Injectable()
  class LimitedTools {
    @McpTool({
      name: 'limited',
      description: 'declares limits',
      input: INPUT,
      taskSupport,
      limits: limits as ToolLimits,
    })
    run(): string {
      return 'ok';
    }
  }
  @Module({ providers: [LimitedTools] })
  class LimitedModule {}
  return LimitedModule;
}

async function problemsOf(limits: unknown, taskSupport?: 'optional' | 'forbidden'): Promise<string[]> {
  const err = await bootToolRegistryFailure(moduleWith(limits, taskSupport));
  return (err as { data?: { problems?: string[] } }).data?.problems ?? [err.message];
}

describe('declared limits (McpToolOptions.limits)', () => {
  it('keeps a valid declaration as declared, and none as none', async () => {
    const cases: Array<[unknown, unknown]> = [
      [undefined, undefined],
      [{ concurrency: 2 }, { concurrency: 2 }],
      [
        {
          concurrency: 4,
          perKey: { argument: 'repo', concurrency: 1 },
          rate: { starts: 10, intervalMs: 1000 },
        },
        {
          concurrency: 4,
          perKey: { argument: 'repo', concurrency: 1 },
          rate: { starts: 10, intervalMs: 1000 },
        },
      ],
      [{ perKey: { argument: 'count', concurrency: 3 } }, { perKey: { argument: 'count', concurrency: 3 } }],
    ];
    for (const [declared, expected] of cases) {
      const { app, registry } = await bootToolRegistry(moduleWith(declared));
      try {
        expect(registry.getTool('limited')?.limits).toEqual(expected);
      } finally {
        await app.close();
      }
    }
  });

  it('stops the boot naming each mistake with its path', async () => {
    const where = 'LimitedTools.run (@McpTool): limits';
    expect(await problemsOf(3)).toEqual([`${where} must be an object ({ concurrency?, perKey?, rate? })`]);
    expect(await problemsOf({})).toEqual([`${where} declares no limit (concurrency, perKey or rate)`]);
    expect(await problemsOf({ concurrency: 1 }, 'forbidden')).toEqual([
      `${where} needs a tool that can run as a task: declare taskSupport 'optional' or 'required'`,
    ]);
    expect(await problemsOf({ concurrency: 0, burst: 2 })).toEqual([
      `${where}.burst is not an option (known: concurrency, perKey, rate)`,
      `${where}.concurrency must be an integer from 1 to 10000`,
    ]);
    expect(await problemsOf({ perKey: { argument: 'note', concurrency: 1 } })).toEqual([
      `${where}.perKey.argument "note" must be a required string or integer property of the input schema`,
    ]);
    expect(await problemsOf({ perKey: { argument: 'missing', concurrency: 1.5 } })).toEqual([
      `${where}.perKey.concurrency must be an integer from 1 to 10000`,
      `${where}.perKey.argument "missing" must be a required string or integer property of the input schema`,
    ]);
    expect(await problemsOf({ rate: { starts: 5 } })).toEqual([
      `${where}.rate.intervalMs must be an integer number of ms from 1 to 86400000`,
    ]);
    expect(await problemsOf({ rate: 'fast' })).toEqual([
      `${where}.rate must be an object ({ starts, intervalMs })`,
    ]);
  });

  it('takes the per-key value from the arguments as text', () => {
    const limits = { perKey: { argument: 'repo', concurrency: 1 } };
    expect(limitKeyOf(limits, { repo: 'acme/api' })).toBe('acme/api');
    expect(limitKeyOf(limits, { repo: 42 })).toBe('42');
    expect(limitKeyOf({ concurrency: 2 }, { repo: 'x' })).toBe('');
    // Too long to keep as it is: the caller (ToolGates) keeps its hash instead.
    expect(limitKeyOf(limits, { repo: 'r'.repeat(300) })).toBeUndefined();
  });
});
