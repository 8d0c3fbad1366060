import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { ConfigValidationError, loadConfig } from '../app.config.js';
import { BusConfig } from '../bus/bus.config.js';
import { DatabaseConfig } from '../database/database.config.js';
import { buildDataSourceOptions } from '../database/typeorm-options.js';
import { ApiKeyInputError } from '../principals/api-keys.service.js';
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
import { runMigrationsCommand } from './migrate-command.js';
import { runApiKeyCommand, runPrincipalsCommand } from './principal-commands.js';
import { errorMessage } from '../common/error-message.js';
import { SCHEMA } from '../schema.js';

export type { CliIo } from './admin-commands.js';

export const USAGE = `usage: npm run cli -- <command> [options]      (add --json for machine-readable output)
  tasks list [--owner ID] [--status S[,S]] [--tool NAME] [--older-than DUR] [--newer-than DUR] [--limit N]
                                              tasks of every owner, newest first (DUR: 90s, 15m, 2h, 7d)
  tasks show TASK_ID                          one task (its status, lease, error, redrives; not its arguments)
  tasks cancel TASK_ID [--reason TEXT]        cancel a live task, as its owner's tasks/cancel would
  tasks retry TASK_ID                         run a finished task again as a new queued task (same tool,
                                              arguments, owner; linked both ways in tasks show); prints its id
  sessions list [--principal ID] [--all] [--limit N]
                                              legacy sessions (--all: ended ones too)
  sessions end SESSION_ID                     end a session; its next request gets 404
  principals list [--name TEXT] [--provider P] [--limit N]
                                              principal ids (for --owner, --principal) by name, email, subject
  instances list [--all]                      server instances, heartbeat state, live tasks held
  janitor run-once                            one janitor sweep now, under the janitor lock
  migrations run                              apply pending migrations under the migration lock (direct URL:
                                              DATABASE_LISTEN_URL when set, else DATABASE_URL)
  migrations show                             list pending migrations
  apikey create --name NAME [--scopes a,b]    create a key for a service account; prints the key once
  apikey list                                 list keys (never the secrets)
  apikey revoke KEY_ID                        revoke a key; requests with it get 401 from then on
an id that starts with - goes after --: tasks show -- -AbC…
exit codes: 0 done, 1 not found or failed, 2 usage error, 3 nothing to do (already finished, revoked, lock held)`;

type Command = (args: string[], services: CliServices, io: CliIo, ds: DataSource) => Promise<number>;

const COMMANDS: Record<string, Command> = {
  tasks: runTasksCommand,
  sessions: runSessionsCommand,
  instances: runInstancesCommand,
  janitor: runJanitorCommand,
  principals: (args, _s, io, ds) => runPrincipalsCommand(args, ds, io),
  migrations: (args, _s, io, ds) => runMigrationsCommand(args, ds, io),
  apikey: (args, s, io) => runApiKeyCommand(args, s.apiKeys, io),
};

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
    // The CLI serves nothing: it is held to the schema, not to the HTTP server's production refusals.
    config = loadConfig(env, { serving: false });
  } catch (err) {
    if (err instanceof ConfigValidationError) {
      io.err(err.message);
      return ExitCode.FAILED;
    }
    throw err;
  }
  // Migrations hold a session advisory lock and one transaction: past a transaction-mode pooler neither
  // holds, so they take the direct URL the LISTEN connection uses when there is one.
  const { DATABASE_URL } = config.get(DatabaseConfig);
  const url =
    argv[0] === 'migrations' ? (config.get(BusConfig).DATABASE_LISTEN_URL ?? DATABASE_URL) : DATABASE_URL;
  if (!url) {
    io.err('The CLI needs DATABASE_URL (postgres://user@host:port/db): the database the server uses.');
    return ExitCode.FAILED;
  }
  const ds = new DataSource(
    buildDataSourceOptions({ url, poolMax: 2, applicationName: 'mcp-task-server-cli', schema: SCHEMA }),
  );
  try {
    await ds.initialize();
  } catch (err) {
    io.err(`cannot connect to the database: ${errorMessage(err)}`);
    return ExitCode.FAILED;
  }
  try {
    return await command(argv.slice(1), buildCliServices(ds, config), io, ds);
  } catch (err) {
    if (err instanceof CliUsageError || err instanceof ApiKeyInputError) {
      io.err(err.message);
      if (err instanceof CliUsageError) io.err(USAGE);
      return ExitCode.USAGE;
    }
    const known = describeCommandError(err);
    io.err(known ?? `failed: ${errorMessage(err)} (are the migrations applied?)`);
    return ExitCode.FAILED;
  } finally {
    await ds.destroy();
  }
}
