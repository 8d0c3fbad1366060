import { setTimeout as sleep } from 'node:timers/promises';
import { contextSlot } from './execution-context.js';

describe('contextSlot', () => {
  const a = contextSlot<string>('a');
  const b = contextSlot<number>('b');

  it('carries each slot through async continuations, independently of the others', async () => {
    expect(a.get()).toBeUndefined();
    await a.run('outer', async () => {
      await b.run(1, async () => {
        await sleep(1);
        expect([a.get(), b.get()]).toEqual(['outer', 1]);
        // Setting one slot keeps the others; clearing one clears only it.
        await a.run('inner', async () => {
          await Promise.resolve();
          expect([a.get(), b.get()]).toEqual(['inner', 1]);
        });
        await a.run(undefined, async () => {
          await sleep(1);
          expect([a.get(), b.get()]).toEqual([undefined, 1]);
        });
        expect([a.get(), b.get()]).toEqual(['outer', 1]);
      });
      expect([a.get(), b.get()]).toEqual(['outer', undefined]);
    });
    expect(a.get()).toBeUndefined();
  });

  it('keeps concurrent runs apart', async () => {
    const seen = await Promise.all(
      ['x', 'y', 'z'].map((v, i) =>
        a.run(v, async () => {
          await sleep(3 - i);
          return a.get();
        }),
      ),
    );
    expect(seen).toEqual(['x', 'y', 'z']);
  });
});
