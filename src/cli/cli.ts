import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { ConfigValidationError, loadConfig } from '../app.config.js';
import { asActor } from '../audit/audit-context.js';
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
import { runAuditCommand } from './audit-commands.js';
import { runQueueCommand } from './queue-commands.js';
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
  queue status [--json]                       every task tool's queue: paused, running, waiting (by reason),
                                              limits in use; and running and waiting per fairness key
  queue pause TOOL                            hold TOOL's queued and new calls on every instance (running
                                              ones finish); exit 1 naming TOOL if it is not a task tool here
  queue resume TOOL                           let TOOL's held calls run again
  audit list [--since T] [--until T] [--principal ID] [--tool NAME] [--task ID] [--session ID]
             [--kind K[,K]] [--actor A] [--before-id N] [--limit N]
                                              audit rows, newest first (T: a duration ago such as 2h,
                                              or an ISO 8601 instant); next page: --before-id
  audit export [same filters] [--after-id N]  every matching row, oldest first, as JSON lines on stdout
                                              (for a SIEM); stderr names the --after-id to resume from
every command accepts --operator NAME: the operator recorded in the audit trail for what it changes
  (default $MCP_OPERATOR, else cli:$USER)
an id that starts with - (only ids minted by older versions do) goes after --: tasks show -- -AbC…
exit codes: 0 done, 1 not found or failed, 2 usage error, 3 nothing to do (already finished, revoked, lock held)`;

type Command = (args: string[], services: CliServices, io: CliIo, ds: DataSource) => Promise<number>;

const COMMANDS: Record<string, Command> = {
  tasks: runTasksCommand,
  sessions: runSessionsCommand,
  instances: runInstancesCommand,
  janitor: runJanitorCommand,
  principals: (args, _s, io, ds) => runPrincipalsCommand(args, ds, io),
  migrations: async (args, s, io, ds) => {
    const { code, applied } = await runMigrationsCommand(args, ds, io);
    if (applied.length > 0) await s.recordOperatorAction({ command: 'migrations run', applied }, io);
    return code;
  },
  apikey: (args, s, io) => runApiKeyCommand(args, s.apiKeys, io),
  audit: runAuditCommand,
  queue: runQueueCommand,
};

const OPERATOR = /^[\x21-\x7e][\x20-\x7e]{0,199}$/;

/**
 * Takes `--operator NAME` (or `--operator=NAME`) out of the arguments, wherever it stands before `--`: the
 * operator is the CLI's, not a command's. Default: $MCP_OPERATOR, else `cli:` + the login name. It is
 * what the audit trail records as the principal of every change the command makes, so a shared service
 * account (a deploy Job) should set it.
 */
export function operatorOf(
  argv: string[],
  env: Record<string, string | undefined>,
): { operator: string; rest: string[] } {
  const rest: string[] = [];
  let operator: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') {
      rest.push(...argv.slice(i));
      break;
    }
    if (a === '--operator') {
      operator = argv[i + 1];
      if (operator === undefined) throw new CliUsageError('--operator needs a value');
      i++;
    } else if (a.startsWith('--operator=')) operator = a.slice('--operator='.length);
    else rest.push(a);
  }
  const chosen = (operator ?? env.MCP_OPERATOR ?? `cli:${env.USER ?? env.LOGNAME ?? 'unknown'}`).trim();
  if (!OPERATOR.test(chosen)) {
    throw new CliUsageError(
      'the operator (--operator or MCP_OPERATOR) must be 1 to 200 printable characters',
    );
  }
  return { operator: chosen, rest };
}

/**
 * The operator CLI (`npm run cli -- …`, or `node dist/src/cli/main.js …` in the image). It reads the same
 * environment as the server and talks to DATABASE_URL through the server's own repositories and locks.
 */
export async function runCli(
  fullArgv: string[],
  env: Record<string, string | undefined>,
  io: CliIo,
): Promise<number> {
  let operator: string;
  let argv: string[];
  try {
    ({ operator, rest: argv } = operatorOf(fullArgv, env));
  } catch (err) {
    if (!(err instanceof CliUsageError)) throw err;
    io.err(err.message);
    return ExitCode.USAGE;
  }
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
    // Every row a command writes names the operator (actor 'operator', detail.via 'cli'): a cancel, a
    // redrive, an ended session, a created or revoked key, a janitor run, a migration.
    const services = buildCliServices(ds, config);
    return await asActor({ kind: 'operator', principal: operator, via: 'cli' }, () =>
      command(argv.slice(1), services, io, ds),
    );
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
