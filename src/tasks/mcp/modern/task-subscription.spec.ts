import type { TaskSnapshot } from '../../task.types.js';
import type { VersionedTask } from '../../task.types.js';
import { RetryBackoff } from '../../../common/retry-backoff.js';
import { TaskSubscription } from './task-subscription.js';

/** A task row as the table holds it: the test moves it forward and answers reads when it says so. */
class Table {
  version = new Map<string, number>();
  readonly reads: { ids: string[]; answer: (rows?: VersionedTask[]) => void; fail: (e: Error) => void }[] =
    [];

  row(id: string): VersionedTask {
    const v = this.version.get(id) ?? 0;
    return { task: { id, status: `v${v}` } as unknown as TaskSnapshot, version: v };
  }

  read = (ids: string[]): Promise<VersionedTask[]> =>
    new Promise((resolve, reject) => {
      // The snapshot is taken when the read runs, as a SELECT would.
      const rows = ids.filter((id) => this.version.has(id)).map((id) => this.row(id));
      this.reads.push({ ids, answer: (override) => resolve(override ?? rows), fail: reject });
    });
}

const flush = () => new Promise((r) => setImmediate(r));

/** Waits (bounded) for a condition the code under test makes true on its own timers. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !done(); i++) await new Promise((r) => setTimeout(r, 2));
  if (!done()) throw new Error('condition not reached');
}

describe('TaskSubscription', () => {
  function setup(ids: string[], retry?: (run: () => void) => RetryBackoff) {
    const table = new Table();
    for (const id of ids) table.version.set(id, 1);
    const sent: string[] = [];
    const errors: unknown[] = [];
    const sub = new TaskSubscription(
      table.read,
      (t) => sent.push(`${t.id}:${t.status}`),
      (e) => errors.push(e),
      Promise.resolve(ids.map((id) => table.row(id))),
      retry,
    );
    return { table, sent, errors, sub };
  }

  it('sends each new version once and nothing at or below the baseline', async () => {
    const { table, sent, sub } = setup(['a']);
    sub.wake('a');
    await flush();
    table.reads.shift()!.answer();
    await sub.settled();
    expect(sent).toEqual([]); // still the baseline version
    table.version.set('a', 2);
    sub.wake('a');
    sub.wake('a'); // coalesced into the queued read
    await flush();
    expect(table.reads).toHaveLength(1);
    table.reads.shift()!.answer();
    await sub.settled();
    expect(sent).toEqual(['a:v2']);
  });

  it('never sends an older state after a newer one, however late a read answers', async () => {
    const { table, sent, sub } = setup(['a']);
    table.version.set('a', 2);
    sub.wake('a');
    await flush();
    const slow = table.reads.shift()!; // read of version 2, answered late
    table.version.set('a', 3);
    sub.wake('a'); // queued behind the slow one, not run beside it
    await flush();
    expect(table.reads).toHaveLength(0);
    slow.answer();
    await flush();
    table.reads.shift()!.answer();
    await sub.settled();
    expect(sent).toEqual(['a:v2', 'a:v3']);
    // A stale answer (an older row) is dropped.
    sub.wake('a');
    await flush();
    table.reads.shift()!.answer([{ task: { id: 'a', status: 'v1' } as unknown as TaskSnapshot, version: 1 }]);
    await sub.settled();
    expect(sent).toEqual(['a:v2', 'a:v3']);
  });

  it('after a resync re-reads every task, and retries ids whose read failed', async () => {
    const { table, sent, errors, sub } = setup(['a', 'b']);
    table.version.set('b', 2);
    sub.wake('b');
    await flush();
    table.reads.shift()!.fail(new Error('connection lost'));
    await sub.settled();
    expect(errors).toHaveLength(1);
    table.version.set('a', 5);
    sub.wake(); // the bus reconnected: anything may have changed
    await flush();
    const read = table.reads.shift()!;
    expect(read.ids.sort()).toEqual(['a', 'b']);
    read.answer();
    await sub.settled();
    expect(sent.sort()).toEqual(['a:v5', 'b:v2']);
  });

  it('reads again by itself after a failed read, with no wake-up, until a read succeeds', async () => {
    const { table, sent, errors, sub } = setup(['a'], (run) => new RetryBackoff(run, 1, 4));
    table.version.set('a', 2);
    sub.wake('a');
    for (let failures = 0; failures < 3; failures++) {
      await until(() => table.reads.length > 0);
      table.reads.shift()!.fail(new Error('pool connection cut'));
    }
    // No NOTIFY, no resync: only the retry can ask again.
    await until(() => table.reads.length > 0);
    expect(table.reads[0].ids).toEqual(['a']);
    table.reads.shift()!.answer();
    await sub.settled();
    expect(errors).toHaveLength(3);
    expect(sent).toEqual(['a:v2']);
    sub.close();
  });

  it('stops retrying once closed', async () => {
    let retry: RetryBackoff | undefined;
    const { table, sub } = setup(['a'], (run) => (retry = new RetryBackoff(run, 1, 4)));
    table.version.set('a', 2);
    sub.wake('a');
    await until(() => table.reads.length > 0);
    table.reads.shift()!.fail(new Error('pool connection cut'));
    await sub.settled();
    expect(retry!.pending).toBe(true);
    sub.close();
    expect(retry!.pending).toBe(false);
  });

  it('ignores ids outside the subscription and stops when closed', async () => {
    const { table, sent, sub } = setup(['a']);
    table.version.set('x', 9);
    sub.wake('x');
    await sub.settled();
    expect(table.reads).toHaveLength(0);
    sub.close();
    table.version.set('a', 2);
    sub.wake('a');
    await sub.settled();
    expect(sent).toEqual([]);
  });
});
