import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEPLOY_DIR } from './deploy-files.js';
import { freePort, findSbinBinary } from './local-host.js';

export interface Nginx {
  baseUrl: string;
  /** Upstream address of every request so far, in order (from the access log); "a, b" after a retry. */
  upstreams(): Promise<{ upstream: string; method: string; uri: string; status: number }[]>;
  /** nginx's error log (warn and above): why it answered a 5xx, when it did. */
  errorLog(): Promise<string>;
  output(): string;
  stop(): Promise<void>;
}

/** The nginx binary (see findSbinBinary). */
export function findNginx(): string {
  return findSbinBinary('nginx');
}

/**
 * The directives of the shipped upstream block (deploy/nginx/nginx.conf) other than its `server` lines: the
 * keep-alive pool and its idle timeout, which the drain of an instance relies on.
 */
export async function shippedUpstreamSettings(): Promise<string[]> {
  return (await shippedUpstreamLines()).filter((l) => !l.startsWith('server '));
}

/**
 * The parameters the shipped `server` lines carry after their address (e.g. `max_fails=0`), which the
 * rendered servers get too; every shipped server line must carry the same ones.
 */
export async function shippedServerParameters(): Promise<string> {
  const params = (await shippedUpstreamLines())
    .filter((l) => l.startsWith('server '))
    .map((l) => l.replace(/;$/, '').split(/\s+/).slice(2).join(' '));
  if (params.length === 0 || params.some((p) => p !== params[0])) {
    throw new Error(
      `deploy/nginx/nginx.conf: the server lines must carry the same parameters (${params.join(' | ')})`,
    );
  }
  return params[0];
}

async function shippedUpstreamLines(): Promise<string[]> {
  const conf = await readFile(join(DEPLOY_DIR, 'nginx', 'nginx.conf'), 'utf8');
  const block = /upstream mcp_servers \{([^}]*)\}/.exec(conf)?.[1];
  if (!block) throw new Error('deploy/nginx/nginx.conf has no upstream mcp_servers block');
  return block
    .split('\n')
    .map((l) => l.replace(/#.*/, '').trim())
    .filter((l) => l !== '');
}

/**
 * Starts a real nginx on loopback in front of `upstreams` (host:port), with the committed
 * deploy/nginx/mcp-proxy.conf and the shipped upstream settings. Everything it writes (pid, logs, temp files) stays in its own temp dir.
 */
export async function startNginx(upstreams: string[]): Promise<Nginx> {
  const dir = await mkdtemp(join(tmpdir(), 'mcp-nginx-'));
  const port = await freePort();
  const serverParameters = await shippedServerParameters();
  const conf = `
daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
${process.getuid?.() === 0 ? 'user root;' : ''}
events { worker_connections 256; }
http {
  log_format upstreams '$request_method $request_uri $status $upstream_addr';
  access_log ${dir}/access.log upstreams;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream mcp_servers {
${upstreams.map((u) => `    server ${u} ${serverParameters};`).join('\n')}
${(await shippedUpstreamSettings()).map((l) => `    ${l}`).join('\n')}
  }
  server {
    listen 127.0.0.1:${port};
    include ${join(DEPLOY_DIR, 'nginx', 'mcp-proxy.conf')};
  }
}
`;
  await writeFile(join(dir, 'nginx.conf'), conf);
  const proc: ChildProcess = spawn(
    findNginx(),
    ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  proc.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const baseUrl = `http://127.0.0.1:${port}`;
  const stop = async (): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGQUIT'); // graceful: let workers finish and exit
      const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 15000;
  for (;;) {
    if (proc.exitCode !== null) {
      const log = await readFile(join(dir, 'error.log'), 'utf8').catch(() => '');
      await stop();
      throw new Error(`nginx exited at start: ${out}\n${log}`);
    }
    const ok = await fetch(`${baseUrl}/health/live`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`nginx did not answer in time: ${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    baseUrl,
    output: () => out,
    stop,
    errorLog: () => readFile(join(dir, 'error.log'), 'utf8').catch(() => ''),
    async upstreams() {
      const log = await readFile(join(dir, 'access.log'), 'utf8').catch(() => '');
      return log
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => {
          // Last, since it may list several addresses ("a, b") when nginx tried another instance.
          const [method, uri, status, ...upstream] = l.split(' ');
          return { upstream: upstream.join(' '), method, uri, status: Number(status) };
        });
    },
  };
}
