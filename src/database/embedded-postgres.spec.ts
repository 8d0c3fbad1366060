import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { blockedAncestor } from './embedded-postgres.js';

describe('blockedAncestor', () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'mcp-perm-'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  // A user that owns nothing here: only the "other" permission bits apply to it.
  const stranger = { uid: 54321, gid: 54321 };

  it('names the first folder a user cannot enter', () => {
    mkdirSync(join(root, 'a', 'b'), { recursive: true });
    chmodSync(root, 0o755);
    chmodSync(join(root, 'a'), 0o700);
    expect(blockedAncestor(join(root, 'a', 'b', 'c'), stranger)).toBe(join(root, 'a'));
  });

  it('passes when every folder on the way is enterable, and ignores folders not made yet', () => {
    mkdirSync(join(root, 'a'), { recursive: true });
    chmodSync(root, 0o755);
    chmodSync(join(root, 'a'), 0o711);
    expect(blockedAncestor(join(root, 'a', 'not', 'yet'), stranger)).toBeUndefined();
  });

  it('uses the owner bits for the owner', () => {
    chmodSync(root, 0o700);
    const me = { uid: process.getuid!(), gid: process.getgid!() };
    expect(blockedAncestor(join(root, 'x'), me)).toBeUndefined();
    expect(blockedAncestor(join(root, 'x'), stranger)).toBe(root);
  });
});
