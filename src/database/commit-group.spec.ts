import { CommitGroupQueue, ON_ITS_OWN } from './commit-group.js';

/** A promise and its resolver, to hold a group in flight for as long as a test needs. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open };
}

describe('CommitGroupQueue', () => {
  it('runs a lone entry on its own path, and groups what arrives while a group is in flight', async () => {
    const groups: number[][] = [];
    const alone: number[] = [];
    const first = gate();
    const q = new CommitGroupQueue<number, string>({
      maxGroup: 10,
      maxInFlight: 1,
      runGroup: async (entries) => {
        groups.push(entries);
        return entries.map((e) => `g${e}`);
      },
      runOne: async (e) => {
        alone.push(e);
        if (e === 0) await first.opened;
        return `a${e}`;
      },
    });
    const lone = q.submit(0);
    await new Promise((r) => setImmediate(r));
    // Entry 0 is in flight (alone); these five wait and then go as one group.
    const rest = [1, 2, 3, 4, 5].map((e) => q.submit(e));
    await new Promise((r) => setImmediate(r));
    expect(q.pending).toBe(5);
    first.open();
    await expect(lone).resolves.toBe('a0');
    await expect(Promise.all(rest)).resolves.toEqual(['g1', 'g2', 'g3', 'g4', 'g5']);
    expect(alone).toEqual([0]);
    expect(groups).toEqual([[1, 2, 3, 4, 5]]);
  });

  it('caps a group at maxGroup and keeps at most maxInFlight groups running', async () => {
    let running = 0;
    let most = 0;
    const sizes: number[] = [];
    const q = new CommitGroupQueue<number, number>({
      maxGroup: 3,
      maxInFlight: 2,
      runGroup: async (entries) => {
        running++;
        most = Math.max(most, running);
        sizes.push(entries.length);
        await new Promise((r) => setTimeout(r, 5));
        running--;
        return entries;
      },
      runOne: async (e) => {
        running++;
        most = Math.max(most, running);
        sizes.push(1);
        await new Promise((r) => setTimeout(r, 5));
        running--;
        return e;
      },
    });
    const all = Array.from({ length: 20 }, (_, i) => q.submit(i));
    await expect(Promise.all(all)).resolves.toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(most).toBe(2);
    expect(Math.max(...sizes)).toBe(3);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(20);
  });

  it('runs every entry of a failed group alone, so each gets its own answer or error', async () => {
    const reports: Array<[number, boolean]> = [];
    const hold = gate();
    const q = new CommitGroupQueue<number, number>({
      maxGroup: 10,
      maxInFlight: 1,
      runGroup: async () => {
        throw new Error('the group could not commit');
      },
      runOne: async (e) => {
        if (e === -1) await hold.opened;
        if (e % 2 === 1) throw new Error(`odd ${e}`);
        return e * 10;
      },
      onGroup: (size, fellBack) => reports.push([size, fellBack]),
    });
    const blocker = q.submit(-1);
    await new Promise((r) => setImmediate(r));
    const answers = [2, 3, 4].map((e) =>
      q.submit(e).then(
        (v) => ({ ok: v }),
        (err: Error) => ({ err: err.message }),
      ),
    );
    await new Promise((r) => setImmediate(r));
    hold.open();
    await blocker;
    expect(await Promise.all(answers)).toEqual([{ ok: 20 }, { err: 'odd 3' }, { ok: 40 }]);
    expect(reports).toEqual([
      [1, false],
      [3, true],
    ]);
  });

  it('sends the entries a group gave back (ON_ITS_OWN) down their own path', async () => {
    const hold = gate();
    const alone: number[] = [];
    const q = new CommitGroupQueue<number, string>({
      maxGroup: 10,
      maxInFlight: 1,
      runGroup: async (entries) => entries.map((e) => (e === 7 ? ON_ITS_OWN : `g${e}`)),
      runOne: async (e) => {
        alone.push(e);
        if (e === 0) await hold.opened;
        return `a${e}`;
      },
    });
    const first = q.submit(0);
    await new Promise((r) => setImmediate(r));
    const rest = [6, 7, 8].map((e) => q.submit(e));
    await new Promise((r) => setImmediate(r));
    hold.open();
    await first;
    await expect(Promise.all(rest)).resolves.toEqual(['g6', 'a7', 'g8']);
    expect(alone).toEqual([0, 7]);
  });
});
