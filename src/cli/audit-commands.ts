import { auditRecordJson } from '../audit/audit-record-json.js';
import { AUDIT_PAGE_MAX, type AuditFilter } from '../audit/audit.repository.js';
import { AUDIT_ACTORS, AUDIT_KINDS, type AuditActorKind } from '../audit/audit.types.js';
import type { CliIo } from './admin-commands.js';
import {
  allowOnly,
  boolFlag,
  CliUsageError,
  ExitCode,
  intFlag,
  parseArgs,
  parseDuration,
  positional,
  stringFlag,
  type ParsedArgs,
} from './cli-args.js';
import type { CliServices } from './cli-context.js';

const FILTERS = ['since', 'until', 'principal', 'tool', 'task', 'session', 'kind', 'actor'] as const;
const ID = /^\d{1,19}$/;

/** `--since 2h` (that long ago) or `--since 2026-12-01T08:00:00Z` (an ISO 8601 instant with a time zone). */
export function parseInstant(text: string, what: string, now: number): Date {
  if (/^\d+(ms|s|m|h|d)$/.test(text)) return new Date(now - parseDuration(text, what));
  const ms = /^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:?\d{2}))?$/.test(text) ? Date.parse(text) : NaN;
  if (Number.isNaN(ms)) {
    throw new CliUsageError(`${what} must be a duration ago (90s, 15m, 2h, 7d) or an ISO 8601 instant`);
  }
  return new Date(ms);
}

function filterOf(parsed: ParsedArgs, now: number): Omit<AuditFilter, 'order' | 'limit' | 'cursor'> {
  const since = stringFlag(parsed, 'since');
  const until = stringFlag(parsed, 'until');
  const kinds = stringFlag(parsed, 'kind')
    ?.split(',')
    .map((k) => k.trim());
  for (const k of kinds ?? []) {
    if (!(AUDIT_KINDS as readonly string[]).includes(k)) {
      throw new CliUsageError(`--kind must be among ${AUDIT_KINDS.join(', ')} (comma-separated)`);
    }
  }
  const actor = stringFlag(parsed, 'actor');
  if (actor !== undefined && !(AUDIT_ACTORS as readonly string[]).includes(actor)) {
    throw new CliUsageError(`--actor must be one of ${AUDIT_ACTORS.join(', ')}`);
  }
  return {
    since: since ? parseInstant(since, '--since', now) : undefined,
    until: until ? parseInstant(until, '--until', now) : undefined,
    principal: stringFlag(parsed, 'principal'),
    tool: stringFlag(parsed, 'tool'),
    taskId: stringFlag(parsed, 'task'),
    sessionId: stringFlag(parsed, 'session'),
    kinds,
    actor: actor as AuditActorKind | undefined,
  };
}

function idFlag(parsed: ParsedArgs, name: string): string | undefined {
  const v = stringFlag(parsed, name);
  if (v !== undefined && !ID.test(v)) throw new CliUsageError(`--${name} must be an audit row id (digits)`);
  return v;
}

/**
 * `audit list`: the newest rows first, one page (`--limit`, at most AUDIT_PAGE_MAX); the next page is
 * `--before-id` the last id shown. `audit export`: every matching row oldest first as JSON lines on stdout,
 * read in pages of AUDIT_PAGE_MAX and written as they come (memory stays at one page whatever the table
 * holds); `--after-id` resumes after the last row a previous export wrote, which it names on stderr.
 */
export async function runAuditCommand(args: string[], s: CliServices, io: CliIo): Promise<ExitCode> {
  const parsed = parseArgs(args, [...FILTERS, 'limit', 'before-id', 'after-id']);
  const now = Date.now();
  switch (parsed.words[0]) {
    case 'list': {
      allowOnly(parsed, [...FILTERS, 'limit', 'before-id', 'json']);
      positional(parsed, []);
      const limit = intFlag(parsed, 'limit', 1, AUDIT_PAGE_MAX, 100);
      const rows = await s.auditLog.list({
        ...filterOf(parsed, now),
        cursor: idFlag(parsed, 'before-id'),
        order: 'newest',
        limit,
      });
      if (boolFlag(parsed, 'json')) io.out(JSON.stringify(rows.map(auditRecordJson), null, 2));
      else {
        io.out(['id', 'at', 'kind', 'actor', 'principal', 'task', 'tool', 'status', 'detail'].join('\t'));
        for (const r of rows)
          io.out(
            [
              r.id,
              r.at.toISOString(),
              r.kind,
              r.actor,
              r.principal ?? '-',
              r.taskId ?? '-',
              r.tool ?? '-',
              r.status ?? '-',
              r.detail ? JSON.stringify(r.detail) : '',
            ].join('\t'),
          );
      }
      if (rows.length === limit) io.err(`more rows: --before-id ${rows[rows.length - 1].id}`);
      return ExitCode.OK;
    }
    case 'export': {
      allowOnly(parsed, [...FILTERS, 'after-id']);
      positional(parsed, []);
      const filter = filterOf(parsed, now);
      let cursor = idFlag(parsed, 'after-id');
      let written = 0;
      for (;;) {
        const page = await s.auditLog.list({ ...filter, cursor, order: 'oldest', limit: AUDIT_PAGE_MAX });
        for (const r of page) io.out(JSON.stringify(auditRecordJson(r)));
        written += page.length;
        if (page.length > 0) cursor = page[page.length - 1].id;
        if (page.length < AUDIT_PAGE_MAX) break;
        // A slow reader (a pipe to a SIEM shipper) holds the next page back instead of it queuing here.
        await io.drain?.();
      }
      io.err(
        `exported ${written} row(s)` + (cursor !== undefined ? `; continue with --after-id ${cursor}` : ''),
      );
      return ExitCode.OK;
    }
    default:
      throw new CliUsageError(
        parsed.words[0] ? `unknown audit command ${parsed.words[0]}` : 'audit needs a command',
      );
  }
}
