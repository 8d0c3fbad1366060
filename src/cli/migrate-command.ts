import type { DataSource } from 'typeorm';
import { runMigrationsLocked } from '../database/migrations-runner.js';
import type { CliIo } from './admin-commands.js';
import { allowOnly, boolFlag, CliUsageError, ExitCode, parseArgs, positional } from './cli-args.js';

/**
 * `migrations run`: applies the pending migrations, in one transaction, under the advisory lock the servers
 * take at boot (a server booting meanwhile waits, then finds nothing to do). This is the one-off a deploy
 * runs before its rollout when the instances have DB_MIGRATIONS_RUN=false (the Kubernetes Job in deploy/k8s).
 * `migrations show` lists what is pending. Nothing to apply is success (0): a Job must not fail on a rerun.
 */
export async function runMigrationsCommand(
  args: string[],
  ds: DataSource,
  io: CliIo,
): Promise<{ code: ExitCode; applied: string[] }> {
  const parsed = parseArgs(args, []);
  allowOnly(parsed, ['json']);
  positional(parsed, []);
  const json = boolFlag(parsed, 'json');
  switch (parsed.words[0]) {
    case 'run': {
      const applied = (await runMigrationsLocked(ds)).map((m) => m.name);
      if (json) io.out(JSON.stringify({ applied }));
      else if (applied.length === 0) io.out('nothing to apply: the schema is current');
      else for (const name of applied) io.out(`applied ${name}`);
      return { code: ExitCode.OK, applied };
    }
    case 'show': {
      const done = new Set(
        (await ds.query<{ name: string }[]>('SELECT name FROM typeorm_migrations').catch(() => [])).map(
          (r) => r.name,
        ),
      );
      const pending = ds.migrations.map((m) => m.name ?? m.constructor.name).filter((n) => !done.has(n));
      if (json) io.out(JSON.stringify({ pending }));
      else if (pending.length === 0) io.out('nothing pending: the schema is current');
      else for (const name of pending) io.out(`pending ${name}`);
      return { code: ExitCode.OK, applied: [] };
    }
    default:
      throw new CliUsageError(
        parsed.words[0] ? `unknown migrations command ${parsed.words[0]}` : 'migrations needs a command',
      );
  }
}
