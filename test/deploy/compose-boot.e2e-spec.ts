import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '../../src/app.config.js';
import { InstancesConfig } from '../../src/instances/instances.config.js';
import { ServerConfig } from '../../src/config/server.config.js';
import { ExamplesConfig } from '../../src/tools/examples/examples.config.js';
import { modernCall, responseOf } from '../support/mcp-http.js';
import { REPO_ROOT, stopServer } from '../support/server-process.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { composeServiceEnv, type Env } from './container-env.js';
import { freePort } from '../support/local-host.js';

const run = promisify(execFile);

/** The shell block the README tells an operator to run before `docker compose up` (it writes `.env`). */
function readmeEnvBlock(): string {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const m = /<!-- compose-env[^>]*-->\s*```sh\n([\s\S]*?)```/.exec(readme);
  if (!m) throw new Error('README has no compose-env block');
  return m[1];
}

/**
 * `docker compose up` without a Docker engine: the environment of the `mcp` service is resolved as compose
 * resolves it (the image's ENV, env_file, environment, `${VAR:-default}` from the `.env` the README has the
 * operator write), and the built server is started with exactly that environment. Only DATABASE_URL (the
 * test database instead of the `postgres` service) and PORT (a free one instead of 3000, which may be taken
 * on a shared machine) differ.
 */
describe('docker compose: the services boot with the environment compose gives them', () => {
  let project: string;
  let db: TestDatabase;

  beforeAll(async () => {
    project = mkdtempSync(join(tmpdir(), 'compose-project-'));
    await run('bash', ['-euo', 'pipefail', '-c', readmeEnvBlock()], {
      cwd: project,
      env: { PATH: process.env.PATH },
    });
    db = await createTestDatabase('compose');
  });
  afterAll(async () => {
    rmSync(project, { recursive: true, force: true });
    await db?.drop();
  });

  it('refuses to resolve without the .env the README asks for, as compose does', () => {
    const bare = mkdtempSync(join(tmpdir(), 'compose-bare-'));
    try {
      expect(() => composeServiceEnv('mcp', { projectDir: bare })).toThrow(/env file .*\.env not found/);
    } finally {
      rmSync(bare, { recursive: true, force: true });
    }
  });

  it('every instance service passes the production boot check with that environment', () => {
    const envs = ['mcp', 'mcp1', 'mcp2', 'mcp3', 'worker'].map((s) =>
      composeServiceEnv(s, { projectDir: project }),
    );
    for (const env of envs) {
      const config = loadConfig(env);
      expect(config.get(ServerConfig).isProduction).toBe(true);
      expect(config.get(ExamplesConfig).EXAMPLE_TOOLS).toBe(false);
    }
    // One MRTR secret for the instances behind the balancer, from .env (never a default in the compose file).
    expect(new Set(envs.map((e) => e.MRTR_STATE_SECRET)).size).toBe(1);
    expect(envs[0].MRTR_STATE_SECRET).toMatch(/^[0-9a-f]{64}$/);
    expect(envs[1].MCP_RESOURCE_URL).toBe('http://localhost:8080/mcp');
    // The worker runs task work only; the instances behind nginx keep the default role.
    expect(envs.map((e) => loadConfig(e).get(InstancesConfig).INSTANCE_ROLE)).toEqual([
      'all',
      'all',
      'all',
      'all',
      'worker',
    ]);
  });

  it('the mcp service becomes ready, guards /metrics with the token, and serves no example tool', async () => {
    const env: Env = {
      ...composeServiceEnv('mcp', { projectDir: project }),
      DATABASE_URL: db.url,
      PORT: String(await freePort()),
    };
    const proc = spawn(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'main.js')], {
      cwd: REPO_ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    proc.stdout.on('data', (d: Buffer) => (output += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    const base = `http://127.0.0.1:${env.PORT}`;
    try {
      const deadline = Date.now() + 30_000;
      let ready = 0;
      while (Date.now() < deadline && proc.exitCode === null) {
        ready = await fetch(`${base}/health/ready`).then(
          (r) => r.status,
          () => 0,
        );
        if (ready === 200) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect({ ready, exit: proc.exitCode }).toEqual({ ready: 200, exit: null });

      expect((await fetch(`${base}/metrics`)).status).toBe(401);
      const metrics = await fetch(`${base}/metrics`, {
        headers: { authorization: `Bearer ${env.METRICS_TOKEN}` },
      });
      expect(metrics.status).toBe(200);

      // The key an operator makes with the image's CLI (`docker compose exec mcp node dist/src/cli/main.js …`).
      const { stdout } = await run(
        process.execPath,
        [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), 'apikey', 'create', '--name', 'compose', '--json'],
        { cwd: REPO_ROOT, env },
      );
      const { key } = JSON.parse(stdout) as { key: string };
      expect((await modernCall(`${base}/mcp`, 1, 'tools/list')).status).toBe(401);
      const list = await modernCall(
        `${base}/mcp`,
        2,
        'tools/list',
        {},
        { headers: { authorization: `Bearer ${key}` } },
      );
      const names = (responseOf(list).result.tools as { name: string }[]).map((t) => t.name);
      expect(names.length).toBeGreaterThan(0);
      expect(names).not.toContain('approve_refund');
      expect(names).not.toContain('generate_report');
    } catch (err) {
      throw new Error(`${err instanceof Error ? err.message : String(err)}\nserver output:\n${output}`);
    } finally {
      await stopServer({ proc, exited });
    }
  });
});
