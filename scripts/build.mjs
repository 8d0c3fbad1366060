// Builds src/ and migrations/ with swc into a fresh folder under .builds/, then points dist at it by renaming
// a new symlink over the old one: one rename(2), so a server starting while another build runs from the same
// checkout sees either the whole previous build or the whole new one, never a half-written or missing tree.
// A running server keeps the build it started from (Node resolves its modules through the link's target).
// Usage: node scripts/build.mjs   (npm run build)
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, readlinkSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const builds = join(root, '.builds');
const dist = join(root, 'dist');
/** Finished builds kept besides the one dist points to, for servers still running from them. */
const KEEP = 2;
/** A build folder without its marker this old was left by a build that died: removed. */
const ABANDONED_MS = 60 * 60 * 1000;
const DONE = '.complete';

mkdirSync(builds, { recursive: true });
const name = `${Date.now()}-${process.pid}`;
const out = join(builds, name);
const swc = spawnSync(
  join(root, 'node_modules', '.bin', 'swc'),
  ['src', 'migrations', '-d', out, '--ignore', '**/*.spec.ts,**/*.int-spec.ts', '--quiet'],
  { cwd: root, stdio: 'inherit' },
);
if (swc.status !== 0) {
  rmSync(out, { recursive: true, force: true });
  process.exit(swc.status ?? 1);
}
writeFileSync(join(out, DONE), '');

// A dist left as a plain folder (by an older build script, or by hand) is moved aside once.
if (existsSync(dist) && !lstatSync(dist).isSymbolicLink()) renameSync(dist, join(builds, `${name}-old`));
const link = join(root, `.dist-${name}`);
symlinkSync(join('.builds', name), link);
renameSync(link, dist);

// Older builds go, except the newest KEEP finished ones and any still being written by a concurrent build.
const current = readlinkSync(dist);
const now = Date.now();
const finished = [];
for (const entry of readdirSync(builds)) {
  const dir = join(builds, entry);
  if (join('.builds', entry) === current) continue;
  if (existsSync(join(dir, DONE)) || entry.endsWith('-old')) finished.push(entry);
  else if (now - statSync(dir).mtimeMs > ABANDONED_MS) rmSync(dir, { recursive: true, force: true });
}
finished.sort((a, b) => Number.parseInt(b, 10) - Number.parseInt(a, 10));
for (const entry of finished.slice(KEEP)) rmSync(join(builds, entry), { recursive: true, force: true });
