import type { INestApplication } from '@nestjs/common';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { SessionsRepository } from '../sessions/sessions.repository.js';
import { createTestApp } from '../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
import { REPO_ROOT } from '../../test/support/server-process.js';
import { runCli } from './cli.js';

interface CliRun {
  code: number;
  out: string;
  err: string;
}

interface Exported {
  id: string;
  at: string;
  kind: string;
  actor: string;
  principal: string | null;
  taskId: string | null;
  tool: string | null;
  detail: Record<string, unknown> | null;
}

const FIELDS = [
  'id',
  'at',
  'kind',
  'actor',
  'principal',
  'taskId',
  'sessionId',
  'tool',
  'era',
  'status',
  'previousStatus',
  'attempt',
  'instanceId',
  'traceId',
  'requestId',
  'detail',
];

/**
 * The CLI's side of the audit trail, on real PostgreSQL beside a running server: who the operator is in
 * the rows its commands write, and reading the trail back (`audit list`, `audit export`).
 */
describe('admin CLI and the audit trail (real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;

  async function cliWith(env: Record<string, string>, ...argv: string[]): Promise<CliRun> {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(
      argv,
      { DATABASE_URL: db.url, LOG_LEVEL: 'error', USER: 'tester', ...env },
      { out: (l) => out.push(l), err: (l) => err.push(l) },
    );
    return { code, out: out.join('\n'), err: err.join('\n') };
  }
  const cli = (...argv: string[]) => cliWith({}, ...argv);

  const query = <R extends Record<string, unknown>>(text: string, values: unknown[] = []): Promise<R[]> =>
    withClient(db.url, async (c) => (await c.query<R>(text, values)).rows);

  beforeAll(async () => {
    db = await createTestDatabase('cli_audit');
    app = await createTestApp(db.url, { JANITOR_ENABLED: 'false', INSTANCE_ROLE: 'web' });
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  describe('the operator of every change', () => {
    beforeEach(() => query('DELETE FROM mcp_audit_event'));
    const last = async (kind: string) =>
      (
        await query<{ actor: string; principal: string; instance_id: string | null; detail: object }>(
          'SELECT actor, principal, instance_id, detail FROM mcp_audit_event WHERE kind = $1 ORDER BY id',
          [kind],
        )
      ).at(-1);

    it('is --operator, else $MCP_OPERATOR, else cli:$USER; the rows say via cli and name no instance', async () => {
      const created = await cli('apikey', 'create', '--name', 'op-bot', '--operator', 'ops:alice', '--json');
      expect(created.code).toBe(0);
      const { id } = JSON.parse(created.out) as { id: string };
      expect(await last('api_key.created')).toEqual({
        actor: 'operator',
        principal: 'ops:alice',
        instance_id: null,
        detail: expect.objectContaining({ keyId: id, name: 'op-bot', via: 'cli' }),
      });
      expect((await cliWith({ MCP_OPERATOR: 'ops:bea' }, 'apikey', 'revoke', id)).code).toBe(0);
      expect(await last('api_key.revoked')).toMatchObject({ actor: 'operator', principal: 'ops:bea' });

      const other = JSON.parse((await cli('apikey', 'create', '--name', 'op-bot-2', '--json')).out) as {
        id: string;
      };
      expect(await last('api_key.created')).toMatchObject({
        principal: 'cli:tester',
        detail: expect.objectContaining({ keyId: other.id }),
      });
      // --operator=NAME after the command words, and before a -- that ends the options.
      expect((await cli('apikey', 'revoke', '--operator=ops:cy', '--', other.id)).code).toBe(0);
      expect(await last('api_key.revoked')).toMatchObject({ principal: 'ops:cy' });
    });

    it('records sessions end (reason operator) and janitor run-once (operator.action)', async () => {
      const sessionId = `s-${randomBytes(8).toString('hex')}`;
      await app.get(SessionsRepository).create({
        id: sessionId,
        principalId: 'proxy:owner-s',
        protocolVersion: '2025-11-25',
        clientCapabilities: {},
        clientInfo: null,
      });
      expect((await cli('sessions', 'end', sessionId, '--operator', 'ops:dan')).code).toBe(0);
      expect(await last('session.ended')).toEqual({
        actor: 'operator',
        principal: 'ops:dan',
        instance_id: null,
        detail: { owner: 'proxy:owner-s', reason: 'operator', via: 'cli' },
      });
      const run = await cli('janitor', 'run-once', '--json', '--operator', 'ops:dan');
      expect(run.code).toBe(0);
      expect(await last('operator.action')).toEqual({
        actor: 'operator',
        principal: 'ops:dan',
        instance_id: null,
        detail: { command: 'janitor run-once', ...(JSON.parse(run.out) as object), via: 'cli' },
      });
    });

    it('refuses an operator that is empty or not printable (exit 2, nothing done)', async () => {
      for (const argv of [
        ['--operator', '', 'apikey', 'list'],
        ['apikey', 'list', '--operator'],
        ['apikey', 'list', '--operator=\u0007bell'],
      ]) {
        const r = await cli(...argv);
        expect(r.code).toBe(2);
        expect(r.err).toMatch(/--operator/);
      }
    });
  });

  describe('audit list and audit export', () => {
    /** The seeded rows, by what they are: ids come from the table. */
    let ids: Record<string, string>;

    beforeAll(async () => {
      await query('DELETE FROM mcp_audit_event');
      const seeded = await query<{ id: string; tag: string }>(
        `INSERT INTO mcp_audit_event (at, kind, actor, principal, task_id, tool, status, detail)
         VALUES (now() - interval '3 hours', 'task.created', 'owner', 'proxy:ann', 't-1', 'tool_a', 'working', '{"tag":"old"}'),
                (now() - interval '1 hour', 'task.cancelled', 'operator', 'ops:zed', 't-1', 'tool_a', 'cancelled', '{"tag":"cancel"}'),
                (now() - interval '30 minutes', 'task.created', 'owner', 'proxy:bo', 't-2', 'tool_b', 'working', '{"tag":"bo"}'),
                (now() - interval '10 minutes', 'auth.scope_refused', 'owner', 'proxy:bo', NULL, 'tool_b', NULL, '{"tag":"refused"}'),
                (now(), 'session.opened', 'owner', 'proxy:ann', NULL, NULL, NULL, '{"tag":"session"}')
         RETURNING id::text, detail->>'tag' AS tag`,
      );
      ids = Object.fromEntries(seeded.map((r) => [r.tag, r.id]));
    });

    const tags = (out: string): string[] => (JSON.parse(out) as Exported[]).map((r) => String(r.detail?.tag));

    it('lists newest first with --json, every field present, and filters', async () => {
      const all = await cli('audit', 'list', '--json');
      expect(all.code).toBe(0);
      const rows = JSON.parse(all.out) as Record<string, unknown>[];
      expect(rows.map((r) => (r.detail as { tag: string }).tag)).toEqual([
        'session',
        'refused',
        'bo',
        'cancel',
        'old',
      ]);
      for (const r of rows) expect(Object.keys(r)).toEqual(FIELDS);
      expect(rows[3]).toMatchObject({
        id: ids.cancel,
        kind: 'task.cancelled',
        actor: 'operator',
        principal: 'ops:zed',
        taskId: 't-1',
        tool: 'tool_a',
        status: 'cancelled',
        at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T.*Z$/),
      });

      expect(tags((await cli('audit', 'list', '--principal', 'proxy:bo', '--json')).out)).toEqual([
        'refused',
        'bo',
      ]);
      expect(tags((await cli('audit', 'list', '--tool', 'tool_a', '--json')).out)).toEqual(['cancel', 'old']);
      expect(tags((await cli('audit', 'list', '--task', 't-1', '--json')).out)).toEqual(['cancel', 'old']);
      expect(
        tags((await cli('audit', 'list', '--kind', 'task.created,session.opened', '--json')).out),
      ).toEqual(['session', 'bo', 'old']);
      expect(tags((await cli('audit', 'list', '--actor', 'operator', '--json')).out)).toEqual(['cancel']);
      expect(tags((await cli('audit', 'list', '--since', '2h', '--json')).out)).toEqual([
        'session',
        'refused',
        'bo',
        'cancel',
      ]);
      const at = (await query<{ at: Date }>('SELECT at FROM mcp_audit_event WHERE id = $1', [ids.bo]))[0].at;
      expect(
        tags((await cli('audit', 'list', '--since', '2h', '--until', at.toISOString(), '--json')).out),
      ).toEqual(['cancel']);
      expect(tags((await cli('audit', 'list', '--since', at.toISOString(), '--json')).out)).toEqual([
        'session',
        'refused',
        'bo',
      ]);
    });

    it('pages with --limit and --before-id (the next cursor on stderr), and prints a table by default', async () => {
      const first = await cli('audit', 'list', '--limit', '2', '--json');
      expect(tags(first.out)).toEqual(['session', 'refused']);
      expect(first.err).toBe(`more rows: --before-id ${ids.refused}`);
      const second = await cli('audit', 'list', '--limit', '2', '--before-id', ids.refused, '--json');
      expect(tags(second.out)).toEqual(['bo', 'cancel']);
      const table = await cli('audit', 'list', '--task', 't-1');
      const lines = table.out.split('\n');
      expect(lines[0]).toBe('id\tat\tkind\tactor\tprincipal\ttask\ttool\tstatus\tdetail');
      expect(lines[1].split('\t')).toEqual([
        ids.cancel,
        expect.any(String),
        'task.cancelled',
        'operator',
        'ops:zed',
        't-1',
        'tool_a',
        'cancelled',
        '{"tag":"cancel"}',
      ]);
    });

    it.each([
      [['audit', 'list', '--kind', 'task.exploded'], /--kind must be among/],
      [['audit', 'list', '--actor', 'robot'], /--actor must be one of/],
      [['audit', 'list', '--since', 'yesterday'], /--since must be a duration ago/],
      [['audit', 'list', '--until', '2026-13-45T99:00:00Z'], /--until must be a duration ago/],
      [['audit', 'list', '--before-id', '12abc'], /--before-id must be an audit row id/],
      [['audit', 'list', '--limit', '5000'], /--limit must be an integer from 1 to 1000/],
      [['audit', 'export', '--limit', '5'], /unknown option --limit/],
      [['audit', 'purge'], /unknown audit command purge/],
    ])('usage error %j exits 2', async (argv, message) => {
      const r = await cli(...argv);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(message);
    });

    it('exports every row oldest first as JSON lines across pages, and resumes after --after-id', async () => {
      // 2,500 more rows: the export reads them in pages of 1,000.
      await query(
        `INSERT INTO mcp_audit_event (kind, actor, principal, detail)
         SELECT 'task.status', 'worker', 'proxy:bulk', jsonb_build_object('n', n) FROM generate_series(1, 2500) n`,
      );
      const all = await cli('audit', 'export');
      expect(all.code).toBe(0);
      const lines = all.out.split('\n').map((l) => JSON.parse(l) as Exported);
      expect(lines).toHaveLength(2505);
      const numeric = lines.map((l) => BigInt(l.id));
      expect(numeric.every((id, i) => i === 0 || id > numeric[i - 1])).toBe(true);
      expect(lines[0].detail).toEqual({ tag: 'old' });
      expect(lines.slice(5).map((l) => l.detail?.n)).toEqual(Array.from({ length: 2500 }, (_, i) => i + 1));
      for (const l of lines) expect(Object.keys(l)).toEqual(FIELDS);
      const lastId = lines[lines.length - 1].id;
      expect(all.err).toBe(`exported 2505 row(s); continue with --after-id ${lastId}`);

      const nothing = await cli('audit', 'export', '--after-id', lastId);
      expect(nothing).toEqual({
        code: 0,
        out: '',
        err: `exported 0 row(s); continue with --after-id ${lastId}`,
      });
      const fromMiddle = await cli(
        'audit',
        'export',
        '--after-id',
        lines[1999].id,
        '--principal',
        'proxy:bulk',
      );
      expect(fromMiddle.out.split('\n').map((l) => (JSON.parse(l) as Exported).detail?.n)).toEqual(
        Array.from({ length: 505 }, (_, i) => i + 1996),
      );
    });

    it('as a process: JSON lines on stdout, and a reader that stops early ends it quietly', async () => {
      const main = join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js');
      const env = { PATH: process.env.PATH, DATABASE_URL: db.url };
      const { stdout, stderr } = await promisify(execFile)(
        process.execPath,
        [main, 'audit', 'export', '--kind', 'task.created'],
        { env },
      );
      expect(
        stdout
          .trimEnd()
          .split('\n')
          .map((l) => (JSON.parse(l) as Exported).detail?.tag),
      ).toEqual(['old', 'bo']);
      expect(stderr).toMatch(/^exported 2 row\(s\); continue with --after-id \d+\n$/);
      // pipefail: the pipeline fails if the CLI does (a crash on EPIPE would exit non-zero).
      const piped = await promisify(execFile)(
        'bash',
        ['-c', `set -o pipefail; "${process.execPath}" "${main}" audit export | head -n 1`],
        { env },
      );
      expect(piped.stdout.trimEnd().split('\n')).toHaveLength(1);
      expect(JSON.parse(piped.stdout)).toMatchObject({ kind: 'task.created' });
      expect(piped.stderr).not.toMatch(/EPIPE|Error/);
    });
  });
});
