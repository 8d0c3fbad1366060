import { spawn, type ChildProcess } from 'node:child_process';
import { chownSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, findSbinBinary } from './local-host.js';

export interface PgBouncer {
  /** `databaseUrl` with its host and port replaced by PgBouncer's. */
  url: string;
  port: number;
  /** "PgBouncer 1.18.0" or whatever the binary says about itself. */
  version: string;
  log(): Promise<string>;
  stop(): Promise<void>;
}

/** The pgbouncer binary (see findSbinBinary). */
export function findPgBouncer(): string {
  return findSbinBinary('pgbouncer');
}

async function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/**
 * Starts a real PgBouncer on loopback in front of the server of `databaseUrl`, with a generated config in its
 * own temp dir (every database, as the URL's user with its password; no client authentication). PgBouncer refuses to run as
 * root: then it is told to switch to the `postgres` user, who gets the temp dir.
 */
export async function startPgBouncer(
  databaseUrl: string,
  opts: { poolMode?: 'session' | 'transaction'; poolSize?: number; settings?: Record<string, string> } = {},
): Promise<PgBouncer> {
  const binary = findPgBouncer();
  const target = new URL(databaseUrl);
  const dir = await mkdtemp(join(tmpdir(), 'mcp-pgbouncer-'));
  const port = await freePort();
  const user = decodeURIComponent(target.username || userInfo().username);
  const settings: Record<string, string> = {
    listen_addr: '127.0.0.1',
    listen_port: String(port),
    unix_socket_dir: '',
    auth_type: 'any',
    pool_mode: opts.poolMode ?? 'transaction',
    default_pool_size: String(opts.poolSize ?? 20),
    max_client_conn: '1000',
    pidfile: join(dir, 'pgbouncer.pid'),
    logfile: join(dir, 'pgbouncer.log'),
    ...opts.settings,
  };
  const conf = [
    '[databases]',
    `* = host=${target.hostname} port=${target.port || '5432'} user=${user}${target.password ? ` password=${decodeURIComponent(target.password)}` : ''}`,
    '[pgbouncer]',
    ...Object.entries(settings).map(([k, v]) => `${k} = ${v}`),
    '',
  ].join('\n');
  const confPath = join(dir, 'pgbouncer.ini');
  await writeFile(confPath, conf);
  const args = [confPath];
  if (process.getuid?.() === 0) {
    const uid = Number((await readFile('/etc/passwd', 'utf8')).match(/^postgres:[^:]*:(\d+):(\d+):/m)?.[1]);
    if (!Number.isInteger(uid))
      throw new Error('pgbouncer refuses to run as root and there is no postgres user');
    chownSync(dir, uid, -1);
    chownSync(confPath, uid, -1);
    args.unshift('-u', 'postgres');
  }
  const proc: ChildProcess = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const log = (): Promise<string> => readFile(settings.logfile, 'utf8').catch(() => out);
  const stop = async (): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 10000;
  while (!(await accepts(port))) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      const text = `${out}\n${await log()}`;
      await stop();
      throw new Error(`pgbouncer did not start: ${text}`);
    }
    await sleep(50);
  }
  const version = /PgBouncer [\d.]+/.exec(await log())?.[0] ?? 'PgBouncer (version unknown)';
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return { url: url.toString(), port, version, log, stop };
}
