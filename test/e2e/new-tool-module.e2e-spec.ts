import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { REPO_ROOT } from '../support/server-process.js';

/**
 * The generator (`npm run new:tool-module`), run in a scratch copy of the project so the checkout is never
 * touched: its refusals change nothing, and what it writes type-checks, lints, passes its own unit spec and
 * answers through the official SDK client on the real server.
 */
describe('npm run new:tool-module', () => {
  let work: string;

  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'new-tool-module-'));
    for (const entry of [
      'src',
      'scripts',
      'migrations',
      'test/support',
      'package.json',
      'tsconfig.json',
      'eslint.config.mjs',
      'jest.config.mjs',
      '.prettierrc.json',
      '.swcrc',
    ]) {
      cpSync(join(REPO_ROOT, entry), join(work, entry), { recursive: true });
    }
    symlinkSync(join(REPO_ROOT, 'node_modules'), join(work, 'node_modules'), 'dir');
  });
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  const generate = (...args: string[]): SpawnSyncReturns<string> =>
    spawnSync(process.execPath, [join(work, 'scripts', 'new-tool-module.mjs'), ...args], {
      cwd: work,
      encoding: 'utf8',
    });

  /** Every file under src/ with a hash of its content: any change the generator makes shows here. */
  const tree = (): Record<string, string> => {
    const out: Record<string, string> = {};
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) walk(path);
        else out[relative(work, path)] = createHash('sha1').update(readFileSync(path)).digest('hex');
      }
    };
    walk(join(work, 'src'));
    return out;
  };

  const run = (command: string, args: string[], env: Record<string, string> = {}) => {
    const result = spawnSync(command, args, {
      cwd: work,
      encoding: 'utf8',
      env: { ...process.env, ...env },
      timeout: 300_000,
    });
    if (result.status !== 0) {
      throw new Error(
        `${command} ${args.join(' ')} exited ${result.status}:\n${result.stdout}\n${result.stderr}`,
      );
    }
    return result.stdout;
  };

  it('refuses bad and reserved names with a clear message and exit code 2, changing nothing', () => {
    const before = tree();
    const cases: [string[], RegExp][] = [
      [[], /usage: npm run new:tool-module -- <team-name>/],
      [['a', 'b'], /usage/],
      [['--force'], /usage/],
      [['Billing'], /"Billing" is not a valid team name: use kebab-case/],
      [['billing_ops'], /not a valid team name/],
      [['billing--ops'], /not a valid team name/],
      [['billing-'], /not a valid team name/],
      [['9lives'], /not a valid team name/],
      [['../escape'], /not a valid team name/],
      [['a'.repeat(41)], /at most 40 characters/],
      [['conformance'], /"conformance" is reserved/],
      [['examples'], /"examples" is reserved/],
      [['example'], /"example" is reserved/],
    ];
    for (const [args, message] of cases) {
      const result = generate(...args);
      expect({ args, status: result.status }).toEqual({ args, status: 2 });
      expect(result.stderr).toMatch(message);
      expect(result.stderr).toMatch(/Nothing was changed\./);
      expect(result.stdout).toBe('');
    }
    expect(tree()).toEqual(before);
  });

  it('creates a module that type-checks, lints, passes its spec and answers a real client; refuses it again', () => {
    const before = tree();
    const created = generate('billing-ops');
    expect(created.stderr).toBe('');
    expect(created.status).toBe(0);
    expect(created.stdout).toMatch(/Created src\/tools\/billing-ops\/ and listed BillingOpsModule/);
    const added = Object.keys(tree()).filter((f) => !(f in before));
    expect(added.sort()).toEqual([
      'src/tools/billing-ops/billing-ops-echo.input.ts',
      'src/tools/billing-ops/billing-ops.module.ts',
      'src/tools/billing-ops/billing-ops.service.spec.ts',
      'src/tools/billing-ops/billing-ops.service.ts',
    ]);
    const registry = readFileSync(join(work, 'src/tools/tool-modules.ts'), 'utf8');
    expect(registry).toContain("import { BillingOpsModule } from './billing-ops/billing-ops.module.js';");
    // Appended at the end of the list, whatever other teams are listed before it.
    expect(registry).toMatch(
      /TOOL_MODULES: readonly Type\[\] = \[\s*TextToolsModule,[^\]]*\bBillingOpsModule,?\s*\]/,
    );

    // The same team again, or a name that maps to the same module: exit 3, nothing changes.
    const afterCreate = tree();
    const again = generate('billing-ops');
    expect(again.status).toBe(3);
    expect(again.stderr).toMatch(/src\/tools\/billing-ops\/ exists already/);
    expect(tree()).toEqual(afterCreate);

    // A client-side check written the way a team would: the kit's server level, the official SDK client.
    writeFileSync(
      join(work, 'src/tools/billing-ops/billing-ops.e2e-spec.ts'),
      `import { McpTestServer } from '../../testing/index.js';
import { toolModules } from '../tool-modules.js';
import { loadConfig } from '../../app.config.js';

it('answers through the SDK client on the real server', async () => {
  const server = await McpTestServer.start({ modules: toolModules(loadConfig({})) });
  try {
    const client = await server.connect();
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('billing_ops_echo');
    expect(await client.callTool({ name: 'billing_ops_echo', arguments: { message: 'hi' } })).toEqual({
      content: [{ type: 'text', text: 'hi' }],
    });
  } finally {
    await server.close();
  }
});
`,
    );
    const bin = (name: string) => join(work, 'node_modules', '.bin', name);
    run(bin('tsc'), ['-p', 'tsconfig.json', '--noEmit']);
    run(bin('eslint'), ['--max-warnings=0', 'src/tools/billing-ops', 'src/tools/tool-modules.ts']);
    run(bin('prettier'), ['--check', 'src/tools/billing-ops', 'src/tools/tool-modules.ts']);
    run(bin('swc'), [
      'src',
      'migrations',
      '-d',
      'dist',
      '--ignore',
      '**/*.spec.ts,**/*.int-spec.ts',
      '--quiet',
    ]);
    const jest = spawnSync(
      process.execPath,
      [
        '--experimental-vm-modules',
        join(work, 'node_modules/jest/bin/jest.js'),
        '--runInBand',
        'src/tools/billing-ops',
      ],
      { cwd: work, encoding: 'utf8', env: { ...process.env }, timeout: 300_000 },
    );
    expect(jest.stderr).toMatch(/Tests:\s+4 passed, 4 total/);
    expect(jest.status).toBe(0);
  }, 600_000); // a type check, a lint, a build and a nested jest run on a shared machine
});
