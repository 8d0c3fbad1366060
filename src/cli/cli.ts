import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { ConfigValidationError, loadConfig } from '../config/load-config.js';
import { buildDataSourceOptions } from '../database/typeorm-options.js';
import { ApiKeyInputError, ApiKeysService } from '../principals/api-keys.service.js';
import {
  describeCommandError,
  runInstancesCommand,
  runJanitorCommand,
  runSessionsCommand,
  runTasksCommand,
  type CliIo,
} from './admin-commands.js';
import { CliUsageError, ExitCode } from './cli-args.js';
import { buildCliServices, type CliServices } from './cli-context.js';

export type { CliIo } from './admin-commands.js';

export const USAGE = `usage: npm run cli -- <command> [options]      (add --json for machine-readable output)
  tasks list [--owner ID] [--status S[,S]] [--tool NAME] [--older-than DUR] [--newer-than DUR] [--limit N]
                                              tasks of every owner, newest first (DUR: 90s, 15m, 2h, 7d)
  tasks show TASK_ID                          one task (its status, lease, error; not its arguments)
  tasks cancel TASK_ID [--reason TEXT]        cancel a live task, as its owner's tasks/cancel would
  sessions list [--principal ID] [--all] [--limit N]
                                              handshake-era sessions (--all: ended ones too)
  sessions end SESSION_ID                     end a session; its next request gets 404
  instances list [--all]                      server instances, heartbeat state, live tasks held
  janitor run-once                            one janitor sweep now, under the janitor lock
  apikey create --name NAME [--scopes a,b]    create a key for a service account; prints the key once
  apikey list                                 list keys (never the secrets)
  apikey revoke ID                            revoke a key; requests with it get 401 from then on
exit codes: 0 done, 1 not found or failed, 2 usage error, 3 nothing to do (already finished, lock held)`;

type Command = (args: string[], services: CliServices, io: CliIo) => Promise<number>;

const COMMANDS: Record<string, Command> = {
  tasks: runTasksCommand,
  sessions: runSessionsCommand,
  instances: runInstancesCommand,
  janitor: runJanitorCommand,
  apikey: (args, s, io) => runApiKeyCommand(args, s.apiKeys, io),
};

/** `--name x --scopes a,b` → { name: 'x', scopes: 'a,b' }, plus the positional words. */
function parseArgs(args: string[]): { flags: Record<string, string>; words: string[] } {
  const flags: Record<string, string> = {};
  const words: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const eq = /^--([a-z-]+)=(.*)$/.exec(a);
    if (eq) flags[eq[1]] = eq[2];
    else if (a.startsWith('--')) flags[a.slice(2)] = args[++i] ?? '';
    else words.push(a);
  }
  return { flags, words };
}

export async function runApiKeyCommand(args: string[], keys: ApiKeysService, io: CliIo): Promise<number> {
  const { flags, words } = parseArgs(args);
  switch (words[0]) {
    case 'create': {
      if (!flags.name) {
        io.err('apikey create needs --name NAME');
        return 2;
      }
      const scopes = (flags.scopes ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '');
      const created = await keys.create(flags.name, scopes);
      io.out(`id: ${created.id}`);
      io.out(`name: ${created.name}`);
      io.out(`scopes: ${created.scopes.join(',')}`);
      io.out(`key: ${created.key}`);
      io.err('Store the key now: it is shown only this once (the server keeps only its hash).');
      return 0;
    }
    case 'list': {
      const rows = await keys.list();
      io.out(['id', 'name', 'scopes', 'created', 'revoked'].join('\t'));
      for (const k of rows) {
        io.out(
          [
            k.id,
            k.name,
            k.scopes.join(','),
            k.createdAt.toISOString(),
            k.revokedAt?.toISOString() ?? '-',
          ].join('\t'),
        );
      }
      return 0;
    }
    case 'revoke': {
      const id = words[1];
      if (!id) {
        io.err('apikey revoke needs the key id');
        return 2;
      }
      if (await keys.revoke(id)) {
        io.out(`revoked ${id}`);
        return 0;
      }
      io.err(`no live API key with id ${id}`);
      return 1;
    }
    default:
      io.err(USAGE);
      return 2;
  }
}

/**
 * The operator CLI (`npm run cli -- …`, or `node dist/src/cli/main.js …` in the image). It reads the same
 * environment as the server and talks to DATABASE_URL through the server's own repositories and locks.
 */
export async function runCli(
  argv: string[],
  env: Record<string, string | undefined>,
  io: CliIo,
): Promise<number> {
  const command = COMMANDS[argv[0] ?? ''];
  if (argv[0] === 'help' || argv[0] === '--help') {
    io.out(USAGE);
    return ExitCode.OK;
  }
  if (!command) {
    io.err(argv[0] ? `unknown command ${argv[0]}` : 'no command given');
    io.err(USAGE);
    return ExitCode.USAGE;
  }
  let config;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigValidationError) {
      io.err(err.message);
      return ExitCode.FAILED;
    }
    throw err;
  }
  const url = config.DATABASE_URL;
  if (!url) {
    io.err('The CLI needs DATABASE_URL (postgres://user@host:port/db): the database the server uses.');
    return ExitCode.FAILED;
  }
  const ds = new DataSource(
    buildDataSourceOptions({ url, poolMax: 2, applicationName: 'mcp-task-server-cli' }),
  );
  try {
    await ds.initialize();
  } catch (err) {
    io.err(`cannot connect to the database: ${err instanceof Error ? err.message : String(err)}`);
    return ExitCode.FAILED;
  }
  try {
    return await command(argv.slice(1), buildCliServices(ds, config), io);
  } catch (err) {
    if (err instanceof CliUsageError || err instanceof ApiKeyInputError) {
      io.err(err.message);
      if (err instanceof CliUsageError) io.err(USAGE);
      return ExitCode.USAGE;
    }
    const known = describeCommandError(err);
    io.err(
      known ?? `failed: ${err instanceof Error ? err.message : String(err)} (are the migrations applied?)`,
    );
    return ExitCode.FAILED;
  } finally {
    await ds.destroy();
  }
}
