import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../support/server-process.js';

/** Files under a folder, or -1 when it cannot be read (missing, or replaced while read). */
function fileCount(dir: string): number {
  try {
    return readdirSync(dir, { recursive: true }).length;
  } catch {
    return -1;
  }
}

function npmBuild(cwd: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn('npm', ['run', 'build', '--silent'], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('exit', (code) => resolve({ code, out }));
  });
}

/**
 * `npm start` builds first, so two starts from one checkout build at once. The package's build script runs in
 * a copy of the checkout (its own package.json, sources and swc settings; node_modules linked): two builds
 * run side by side after a first one while the tree a start would load is watched every few milliseconds. It
 * must always be the whole build, never missing (the old `rm -rf dist && swc` left no main.js for a while) or
 * half written.
 */
describe('npm run build while another build runs from the same checkout', () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'build-swap-'));
    for (const entry of ['package.json', '.swcrc', 'src', 'migrations', 'scripts']) {
      cpSync(join(REPO_ROOT, entry), join(dir, entry), { recursive: true });
    }
    symlinkSync(join(REPO_ROOT, 'node_modules'), join(dir, 'node_modules'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('never shows a start a missing or half-built tree', async () => {
    const first = await npmBuild(dir);
    expect(first).toEqual({ code: 0, out: expect.any(String) });
    const tree = join(dir, 'dist', 'src');
    const whole = fileCount(tree);
    expect(whole).toBeGreaterThan(100);

    const seen: number[] = [];
    let building = true;
    const watching = (async () => {
      while (building) {
        seen.push(existsSync(join(tree, 'main.js')) ? fileCount(tree) : -1);
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    const both = await Promise.all([npmBuild(dir), npmBuild(dir)]);
    building = false;
    await watching;

    expect(both.map((b) => b.code)).toEqual([0, 0]);
    // The watcher looked while both builds ran (a busy machine gives it a few turns only: each look reads
    // the whole tree).
    expect(seen.length).toBeGreaterThanOrEqual(3);
    expect(seen.filter((n) => n !== whole)).toEqual([]);
    expect(fileCount(tree)).toBe(whole);
  });
});
