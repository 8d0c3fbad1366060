import type { DataSource } from 'typeorm';
import type { ApiKeysService } from '../principals/api-keys.service.js';
import type { CliIo } from './admin-commands.js';
import {
  allowOnly,
  boolFlag,
  CliUsageError,
  ExitCode,
  intFlag,
  parseArgs,
  positional,
  stringFlag,
} from './cli-args.js';

const iso = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null);

/** `apikey create|list|revoke`: service-account keys. The secret is printed once, at creation. */
export async function runApiKeyCommand(args: string[], keys: ApiKeysService, io: CliIo): Promise<ExitCode> {
  const parsed = parseArgs(args, ['name', 'scopes']);
  const json = boolFlag(parsed, 'json');
  switch (parsed.words[0]) {
    case 'create': {
      allowOnly(parsed, ['name', 'scopes', 'json']);
      positional(parsed, []);
      const name = stringFlag(parsed, 'name');
      if (!name) throw new CliUsageError('apikey create needs --name NAME');
      const scopes = (parsed.flags.has('scopes') ? String(parsed.flags.get('scopes')) : '')
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '');
      const created = await keys.create(name, scopes);
      if (json) io.out(JSON.stringify({ ...created, principalId: `apikey:${created.id}` }, null, 2));
      else {
        io.out(`id: ${created.id}`);
        io.out(`name: ${created.name}`);
        io.out(`scopes: ${created.scopes.join(',')}`);
        io.out(`principal: apikey:${created.id}`);
        io.out(`key: ${created.key}`);
      }
      io.err('Store the key now: it is shown only this once (the server keeps only its hash).');
      return ExitCode.OK;
    }
    case 'list': {
      allowOnly(parsed, ['json']);
      positional(parsed, []);
      const view = (await keys.list()).map((k) => ({
        id: k.id,
        name: k.name,
        scopes: k.scopes,
        principalId: `apikey:${k.id}`,
        createdAt: iso(k.createdAt),
        revokedAt: iso(k.revokedAt),
      }));
      if (json) io.out(JSON.stringify(view, null, 2));
      else {
        io.out(['id', 'name', 'scopes', 'created', 'revoked'].join('\t'));
        for (const k of view)
          io.out([k.id, k.name, k.scopes.join(','), k.createdAt, k.revokedAt ?? '-'].join('\t'));
      }
      return ExitCode.OK;
    }
    case 'revoke': {
      allowOnly(parsed, ['json']);
      const [id] = positional(parsed, ['KEY_ID']);
      if (await keys.revoke(id)) {
        io.out(json ? JSON.stringify({ revoked: true, id }) : `revoked ${id}`);
        return ExitCode.OK;
      }
      // Not revoked now: either it never existed (1) or it already was (3, nothing to do), as tasks cancel.
      const known = (await keys.list()).find((k) => k.id === id);
      if (!known) {
        io.err(`no API key with id ${id}`);
        return ExitCode.FAILED;
      }
      if (json) io.out(JSON.stringify({ revoked: false, id }));
      io.err(`API key ${id} was already revoked at ${iso(known.revokedAt)}; nothing to do`);
      return ExitCode.NOT_APPLIED;
    }
    default:
      throw new CliUsageError(
        parsed.words[0] ? `unknown apikey command ${parsed.words[0]}` : 'apikey needs a command',
      );
  }
}

interface PrincipalRow {
  id: string;
  provider: string;
  issuer: string | null;
  subject: string;
  display_name: string | null;
  email: string | null;
  created_at: Date;
  last_seen_at: Date;
}

/**
 * `principals list [--name TEXT]`: turns what an operator knows (a user name, an email, a subject, a key id)
 * into the principal id that `tasks list --owner` and `sessions list --principal` take. Principals are
 * recorded when they first authenticate, so one that never called the server is not listed.
 */
export async function runPrincipalsCommand(args: string[], ds: DataSource, io: CliIo): Promise<ExitCode> {
  const parsed = parseArgs(args, ['name', 'provider', 'limit']);
  if (parsed.words[0] !== 'list') {
    throw new CliUsageError(
      parsed.words[0] ? `unknown principals command ${parsed.words[0]}` : 'principals needs a command',
    );
  }
  allowOnly(parsed, ['name', 'provider', 'limit', 'json']);
  positional(parsed, []);
  const name = stringFlag(parsed, 'name');
  const provider = stringFlag(parsed, 'provider');
  const limit = intFlag(parsed, 'limit', 1, 10_000, 100);
  // A substring match, case-insensitive, with the LIKE wildcards of the input taken literally.
  const pattern = name === undefined ? null : `%${name.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const rows = await ds.query<PrincipalRow[]>(
    `SELECT id, provider, issuer, subject, display_name, email, created_at, last_seen_at
       FROM principal
      WHERE ($1::text IS NULL OR id ILIKE $1 OR subject ILIKE $1 OR display_name ILIKE $1 OR email ILIKE $1)
        AND ($2::text IS NULL OR provider = $2)
      ORDER BY last_seen_at DESC, id
      LIMIT $3`,
    [pattern, provider ?? null, limit],
  );
  const view = rows.map((r) => ({
    id: r.id,
    provider: r.provider,
    issuer: r.issuer,
    subject: r.subject,
    displayName: r.display_name,
    email: r.email,
    createdAt: iso(r.created_at),
    lastSeenAt: iso(r.last_seen_at),
  }));
  if (boolFlag(parsed, 'json')) io.out(JSON.stringify(view, null, 2));
  else {
    io.out(['id', 'provider', 'name', 'email', 'last_seen'].join('\t'));
    for (const v of view)
      io.out([v.id, v.provider, v.displayName ?? '-', v.email ?? '-', v.lastSeenAt].join('\t'));
  }
  return ExitCode.OK;
}
