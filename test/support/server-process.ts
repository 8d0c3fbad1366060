import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const MAIN = join(REPO_ROOT, 'dist', 'src', 'main.js');

export interface ServerProcess {
  proc: ChildProcess;
  port: number;
  baseUrl: string;
  output(): string;
  /** Resolves with the exit code once the process has ended. */
  exited: Promise<number | null>;
}

/** Environment for a spawned server: nothing leaks in from the test runner's own environment. */
export function serverEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, PORT: '0', LOG_LEVEL: 'log', ...env };
}

/** Runs the built server (`dist/`, built by `pretest`) and collects its output. */
export function runServer(env: Record<string, string>): {
  proc: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
} {
  const proc = spawn(process.execPath, [MAIN], {
    cwd: REPO_ROOT,
    env: serverEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return { proc, output: () => out, exited };
}

/** Starts the built server and waits until it logs the port it listens on. */
export async function startServer(env: Record<string, string>, timeoutMs = 30000): Promise<ServerProcess> {
  const run = runServer(env);
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      run.proc.kill('SIGKILL'); // never leave a half-started server behind
      reject(new Error(`server did not start in ${timeoutMs} ms:\n${run.output()}`));
    }, timeoutMs);
    const check = (): void => {
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(run.output());
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    run.proc.stdout?.on('data', check);
    void run.exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${run.output()}`));
    });
  });
  return { ...run, port, baseUrl: `http://127.0.0.1:${port}` };
}

export async function stopServer(
  server: { proc: ChildProcess; exited: Promise<number | null> },
  signal: NodeJS.Signals = 'SIGTERM',
): Promise<number | null> {
  if (server.proc.exitCode !== null || server.proc.signalCode !== null) return server.exited;
  server.proc.kill(signal);
  return server.exited;
}
