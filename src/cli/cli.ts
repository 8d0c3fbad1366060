import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { ConfigValidationError, loadConfig } from '../config/load-config.js';
import { buildDataSourceOptions } from '../database/typeorm-options.js';
import { ApiKey } from '../principals/api-key.entity.js';
import { ApiKeysRepository } from '../principals/api-keys.repository.js';
import { ApiKeyInputError, ApiKeysService } from '../principals/api-keys.service.js';

export interface CliIo {
  out(line: string): void;
  err(line: string): void;
}

const USAGE = `usage:
  apikey create --name NAME [--scopes a,b]   create a key for a service account; prints the key once
  apikey list                                 list keys (never the secrets)
  apikey revoke ID                            revoke a key; requests with it get 401 from then on`;

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
 * environment as the server and talks to DATABASE_URL through the same TypeORM options builder.
 */
export async function runCli(
  argv: string[],
  env: Record<string, string | undefined>,
  io: CliIo,
): Promise<number> {
  if (argv[0] !== 'apikey') {
    io.err(USAGE);
    return 2;
  }
  let url: string | undefined;
  try {
    url = loadConfig(env).DATABASE_URL;
  } catch (err) {
    if (err instanceof ConfigValidationError) {
      io.err(err.message);
      return 1;
    }
    throw err;
  }
  if (!url) {
    io.err('The CLI needs DATABASE_URL (postgres://user@host:port/db): the database the server uses.');
    return 1;
  }
  const ds = new DataSource(
    buildDataSourceOptions({ url, poolMax: 1, applicationName: 'mcp-task-server-cli' }),
  );
  await ds.initialize();
  try {
    return await runApiKeyCommand(
      argv.slice(1),
      new ApiKeysService(new ApiKeysRepository(ds.getRepository(ApiKey))),
      io,
    );
  } catch (err) {
    if (err instanceof ApiKeyInputError) {
      io.err(err.message);
      return 2;
    }
    io.err(`failed: ${err instanceof Error ? err.message : String(err)} (are the migrations applied?)`);
    return 1;
  } finally {
    await ds.destroy();
  }
}
