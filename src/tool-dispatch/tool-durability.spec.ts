import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { RecordingToolContext } from '../../test/support/recording-tool-context.js';
import { bootToolRegistry, bootToolRegistryFailure } from '../../test/support/tool-registry-context.js';
import { CheckpointError, McpTool, serialiseCheckpoint, type ToolDurability } from './index.js';

/** A module with one tool declaring `durability` (and `taskSupport`). */
function moduleWith(durability: unknown, taskSupport: 'optional' | 'forbidden' = 'optional') {
  @Injectable()
  class DurableTools {
    @McpTool({
      name: 'durable',
      description: 'declares durability',
      taskSupport,
      durability: durability as ToolDurability,
    })
    run(): string {
      return 'ok';
    }
  }
  @Module({ providers: [DurableTools] })
  class DurableModule {}
  return DurableModule;
}

/** The problems the boot stops with for this declaration. */
async function problemsOf(durability: unknown, taskSupport?: 'optional' | 'forbidden'): Promise<string[]> {
  const err = await bootToolRegistryFailure(moduleWith(durability, taskSupport));
  return (err as { data?: { problems?: string[] } }).data?.problems ?? [err.message];
}

describe('declared durability (McpToolOptions.durability)', () => {
  it('normalises a declaration: defaults filled in, maxAttempts derived', async () => {
    const retryOn = (): boolean => true;
    const cases: Array<[unknown, Record<string, unknown>]> = [
      [undefined, { resumable: false, maxAttempts: 1 }],
      [{ resumable: true }, { resumable: true, maxAttempts: 3 }],
      [
        { retry: { maxAttempts: 5, initialDelayMs: 200 }, maxRunMs: 5000 },
        {
          resumable: false,
          maxAttempts: 5,
          retry: { maxAttempts: 5, initialDelayMs: 200, factor: 2, maxDelayMs: 60000 },
          maxRunMs: 5000,
        },
      ],
      [
        {
          resumable: true,
          retry: { maxAttempts: 2, initialDelayMs: 0, factor: 1.5, maxDelayMs: 10, retryOn },
        },
        {
          resumable: true,
          maxAttempts: 2,
          retry: { maxAttempts: 2, initialDelayMs: 0, factor: 1.5, maxDelayMs: 10, retryOn },
        },
      ],
    ];
    for (const [declared, expected] of cases) {
      const { app, registry } = await bootToolRegistry(moduleWith(declared));
      try {
        expect(registry.getTool('durable')?.durability).toEqual(expected);
      } finally {
        await app.close();
      }
    }
  });

  it('stops the boot naming each mistake with its path', async () => {
    const where = 'DurableTools.run (@McpTool): durability';
    expect(await problemsOf('yes')).toEqual([
      `${where} must be an object ({ resumable?, retry?, maxRunMs? })`,
    ]);
    expect(await problemsOf({ resumable: true }, 'forbidden')).toEqual([
      `${where} applies to task runs only: declare taskSupport 'optional' or 'required'`,
    ]);
    expect(await problemsOf({ resumable: 'yes', maxRunMs: 0, retries: 3 })).toEqual([
      `${where}.retries is not an option (known: resumable, retry, maxRunMs)`,
      `${where}.resumable must be a boolean`,
      `${where}.maxRunMs must be an integer number of ms from 1 to 2592000000 (30 days)`,
    ]);
    expect(
      await problemsOf({
        retry: {
          maxAttempts: 0,
          initialDelayMs: -1,
          factor: 0.5,
          maxDelayMs: 1.5,
          retryOn: 'all',
          backoff: 1,
        },
      }),
    ).toEqual([
      `${where}.retry.backoff is not an option (known: maxAttempts, initialDelayMs, factor, maxDelayMs, retryOn)`,
      `${where}.retry.maxAttempts must be an integer from 1 to 100 (runs in all, the first included)`,
      `${where}.retry.initialDelayMs must be an integer number of ms from 0 to 86400000`,
      `${where}.retry.factor must be a number from 1 to 100`,
      `${where}.retry.maxDelayMs must be an integer number of ms from 0 to 86400000`,
      `${where}.retry.retryOn must be a function (error) => boolean`,
    ]);
    expect(await problemsOf({ retry: { maxAttempts: 3, initialDelayMs: 500, maxDelayMs: 100 } })).toEqual([
      `${where}.retry.maxDelayMs (100) must not be below initialDelayMs (500)`,
    ]);
    expect(await problemsOf({ retry: 5 })).toEqual([
      `${where}.retry must be an object ({ maxAttempts, initialDelayMs, factor?, maxDelayMs?, retryOn? })`,
    ]);
  });
});

describe('checkpoint serialisation (serialiseCheckpoint)', () => {
  const refusal = (state: unknown, max = 65536): string => {
    try {
      serialiseCheckpoint(state, max);
    } catch (err) {
      expect(err).toBeInstanceOf(CheckpointError);
      return (err as Error).message;
    }
    throw new Error('the checkpoint was accepted');
  };

  it('takes JSON as JSON.stringify writes it', () => {
    expect(serialiseCheckpoint({ step: 3, done: [1, 2], skip: undefined }, 100)).toBe(
      '{"step":3,"done":[1,2]}',
    );
    expect(serialiseCheckpoint(null, 100)).toBe('null');
    expect(serialiseCheckpoint({ at: new Date(0) }, 100)).toBe('{"at":"1970-01-01T00:00:00.000Z"}');
    // The same object twice (not inside itself) is no cycle.
    const shared = { a: 1 };
    expect(serialiseCheckpoint({ x: shared, y: [shared] }, 100)).toBe('{"x":{"a":1},"y":[{"a":1}]}');
  });

  it('refuses what is not JSON, naming where', () => {
    expect(refusal({ f: () => 1 })).toBe('The checkpoint is not JSON: checkpoint.f is a function');
    expect(refusal({ n: [1, 2n] })).toBe(
      'The checkpoint is not JSON: checkpoint.n[1] is a BigInt (JSON has no BigInt: save it as a string)',
    );
    const cyclic: Record<string, unknown> = { a: { b: {} } };
    (cyclic.a as Record<string, Record<string, unknown>>).b.back = cyclic;
    expect(refusal(cyclic)).toBe(
      'The checkpoint is not JSON: checkpoint.a.b.back refers back to itself (a cycle)',
    );
    expect(refusal(undefined)).toBe('The checkpoint is not JSON: checkpoint is undefined');
    expect(refusal({ x: NaN })).toBe(
      'The checkpoint is not JSON: checkpoint.x is NaN (JSON numbers are finite)',
    );
    expect(refusal({ m: new Map() })).toBe(
      'The checkpoint is not JSON: checkpoint.m is a Map (save an object or an array)',
    );
    expect(refusal({ s: 'a\u0000b' })).toBe(
      'The checkpoint cannot be stored: checkpoint.s contains a NUL character (\\u0000)',
    );
  });

  it('refuses a checkpoint over the cap, naming the setting and both sizes', () => {
    expect(refusal({ blob: 'x'.repeat(100) }, 64)).toBe(
      'The checkpoint is 111 bytes of JSON, over QUOTA_TASK_CHECKPOINT_BYTES = 64 bytes',
    );
  });

  it('is what the testing kit records (RecordingToolContext)', async () => {
    const ctx = new RecordingToolContext(
      {},
      { attempt: 2, lastCheckpoint: { step: 1 }, checkpointBytes: 32 },
    );
    expect([ctx.attempt, ctx.lastCheckpoint]).toEqual([2, { step: 1 }]);
    await ctx.checkpoint({ step: 2 });
    await expect(ctx.checkpoint({ blob: 'x'.repeat(64) })).rejects.toThrow(
      'over QUOTA_TASK_CHECKPOINT_BYTES = 32',
    );
    expect(ctx.checkpoints).toEqual([{ step: 2 }]);
  });
});
