import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { DEPLOY_DIR } from '../support/deploy-files.js';
import { REPO_ROOT } from '../support/server-process.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';
import { dockerfileEnv, type Env } from './container-env.js';

interface Run {
  code: number;
  out: string;
}

async function run(argv: string[], env: Env): Promise<Run> {
  try {
    const { stdout, stderr } = await promisify(execFile)(argv[0], argv.slice(1), { cwd: REPO_ROOT, env });
    return { code: 0, out: stdout + stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, out: err.stdout + err.stderr };
  }
}

async function appliedMigrations(url: string): Promise<number> {
  return withClient(url, (c) =>
    c.query<{ n: number }>('SELECT count(*)::int AS n FROM typeorm_migrations').then((r) => r.rows[0].n),
  );
}

/**
 * The image's one-off commands, run as the image runs them: with the image's own ENV (NODE_ENV=production,
 * HOST=0.0.0.0 from the Dockerfile) plus only a DATABASE_URL, against a real, empty database. They serve
 * nothing, so the HTTP server's production refusals (AUTH_PROVIDERS, METRICS_TOKEN, MCP_RESOURCE_URL) must
 * not stop them.
 */
describe('the image’s one-off commands (migration, admin CLI) with the image’s environment', () => {
  const image = dockerfileEnv();
  const job = parseAllDocuments(
    readFileSync(join(DEPLOY_DIR, 'k8s', 'migrate-job.yaml'), 'utf8'),
  )[0].toJS() as {
    spec: { template: { spec: { containers: { command: string[] }[] } } };
  };
  const jobCommand = job.spec.template.spec.containers[0].command;
  let db: TestDatabase;
  let expected: number;

  beforeAll(async () => {
    expect(image).toMatchObject({ NODE_ENV: 'production', HOST: '0.0.0.0' });
    db = await createTestDatabase('one_off');
  });
  afterAll(async () => {
    await db.drop();
  });

  it('the migration Job’s command migrates an empty database, and a rerun succeeds with nothing to do', async () => {
    expect(jobCommand[0]).toBe('node');
    const argv = [process.execPath, ...jobCommand.slice(1)];
    const first = await run(argv, { ...image, DATABASE_URL: db.url });
    expect(first).toMatchObject({ code: 0 });
    expect(first.out).toMatch(/^applied /m);
    expected = (first.out.match(/^applied /gm) ?? []).length;
    expect(await appliedMigrations(db.url)).toBe(expected);
    expect(await run(argv, { ...image, DATABASE_URL: db.url })).toEqual({
      code: 0,
      out: 'nothing to apply: the schema is current\n',
    });
  });

  it('the documented TypeORM CLI migration runs with the image’s environment', async () => {
    const fresh = await createTestDatabase('one_off_typeorm');
    try {
      const r = await run(
        [process.execPath, 'node_modules/typeorm/cli.js', 'migration:run', '-d', 'dist/src/data-source.js'],
        { ...image, DATABASE_URL: fresh.url },
      );
      expect(r.code).toBe(0);
      expect(await appliedMigrations(fresh.url)).toBe(expected);
    } finally {
      await fresh.drop();
    }
  });

  it('the admin CLI runs in the image with HOST=0.0.0.0 and no AUTH_PROVIDERS', async () => {
    const r = await run([process.execPath, 'dist/src/cli/main.js', 'instances', 'list', '--json'], {
      ...image,
      DATABASE_URL: db.url,
    });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual([]);
  });
});
