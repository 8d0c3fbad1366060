import type { INestApplication } from '@nestjs/common';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PgBusService } from '../bus/pg-bus.service.js';
import { InstancesService } from '../instances/instances.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { SessionsRepository } from '../sessions/sessions.repository.js';
import { SessionsService } from '../sessions/sessions.service.js';
import { TASK_CHANNEL } from '../tasks/store/task-change-publisher.js';
import { TaskCreationRepository } from '../tasks/store/task-creation.repository.js';
import { TaskOutcomesRepository } from '../tasks/store/task-outcomes.repository.js';
import { TASK_QUEUE_CHANNEL } from '../tasks/task-queue.js';
import { createTestApp } from '../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
import { REPO_ROOT } from '../../test/support/server-process.js';
import { runCli } from './cli.js';

interface CliRun {
  code: number;
  out: string;
  err: string;
}

/**
 * The admin CLI against real PostgreSQL, beside a real server app on the same database (the app migrates
 * it, and its bus hears what the CLI publishes). Most cases call runCli in-process; a few run the built
 * binary as a child process to check real exit codes and streams.
 */
describe('admin CLI (real PostgreSQL, beside a running server)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let tasks: TaskCreationRepository;

  async function cli(...argv: string[]): Promise<CliRun> {
    return cliWith({}, ...argv);
  }

  async function cliWith(env: Record<string, string>, ...argv: string[]): Promise<CliRun> {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(
      argv,
      { DATABASE_URL: db.url, LOG_LEVEL: 'error', ...env },
      { out: (l) => out.push(l), err: (l) => err.push(l) },
    );
    return { code, out: out.join('\n'), err: err.join('\n') };
  }

  async function newTask(
    ownerId: string,
    toolName: string,
    id = `cli-${randomBytes(6).toString('hex')}`,
  ): Promise<string> {
    await tasks.insertWithLimits(
      {
        id,
        ownerId,
        sessionId: null,
        era: 'modern',
        toolName,
        ttlMs: 3_600_000,
        pollIntervalMs: 1000,
        requestParams: { name: toolName, arguments: { secret: 'not-for-operators' } },
        instanceId: app.get(InstancesService).instanceId,
        leaseMs: 600_000,
      },
      { maxPerOwner: 1000, maxTotal: 1000, maxRetainedPerOwner: 1000 },
    );
    return id;
  }

  beforeAll(async () => {
    db = await createTestDatabase('cli');
    // A web instance runs no task work: a task `tasks retry` queues stays queued here, where it can be
    // looked at (test/e2e/redrive.e2e-spec.ts has a worker run one).
    app = await createTestApp(db.url, { JANITOR_ENABLED: 'false', INSTANCE_ROLE: 'web' });
    tasks = app.get(TaskCreationRepository);
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  /** A task of `ownerId` run by the app's instance, then failed by that run (as a handler error would). */
  async function failedTask(ownerId: string, toolName: string): Promise<string> {
    const instanceId = app.get(InstancesService).instanceId;
    const id = `cli-${randomBytes(6).toString('hex')}`;
    await tasks.insertWithLimits(
      {
        id,
        ownerId,
        sessionId: 'session-of-the-old-task',
        era: 'legacy',
        toolName,
        ttlMs: 600_000,
        pollIntervalMs: 750,
        requestParams: { name: toolName, arguments: { n: 7 }, task: { ttl: 600_000 } },
        instanceId,
        leaseMs: 600_000,
        principal: { id: ownerId, provider: 'proxy', subject: 'ops', scopes: ['tasks'], groups: [] },
        resumable: true,
        maxAttempts: 4,
      },
      { maxPerOwner: 1000, maxTotal: 1000, maxRetainedPerOwner: 1000 },
    );
    const r = await app
      .get(TaskOutcomesRepository)
      .failIfCurrent({ taskId: id, generation: 1, instanceId }, { code: -32603, message: 'upstream down' });
    expect(r.applied).toBe(true);
    return id;
  }

  describe('tasks', () => {
    let a1: string;
    let a2: string;
    let b1: string;

    beforeAll(async () => {
      a1 = await newTask('owner-a', 'tool_x');
      a2 = await newTask('owner-a', 'tool_y');
      b1 = await newTask('owner-b', 'tool_x');
      await withClient(db.url, (c) =>
        c.query(`UPDATE task SET created_at = now() - interval '3 hours' WHERE id = $1`, [a1]),
      );
    });

    it('lists every owner with --json, and filters by owner, status, tool and age', async () => {
      const ids = async (...filters: string[]): Promise<string[]> => {
        const r = await cli('tasks', 'list', '--json', ...filters);
        expect(r.code).toBe(0);
        return (JSON.parse(r.out) as { id: string }[]).map((t) => t.id).sort();
      };
      expect(await ids()).toEqual(expect.arrayContaining([a1, a2, b1].sort()));
      expect(await ids('--owner', 'owner-a')).toEqual([a1, a2].sort());
      expect(await ids('--tool', 'tool_x', '--owner', 'owner-b')).toEqual([b1]);
      expect(await ids('--owner', 'owner-a', '--older-than', '2h')).toEqual([a1]);
      expect(await ids('--owner', 'owner-a', '--newer-than', '1h')).toEqual([a2]);
      expect(await ids('--owner', 'owner-a', '--status', 'completed,failed')).toEqual([]);
      expect(await ids('--owner', 'owner-a', '--status=working')).toEqual([a1, a2].sort());
    });

    it('prints a table by default and never the arguments of a task', async () => {
      const list = await cli('tasks', 'list', '--owner', 'owner-b');
      expect(list.out.split('\n')[0]).toBe('id\tstatus\ttool\towner\tcreated\tupdated\tinstance\tmessage');
      expect(list.out).toContain(`${b1}\tworking\ttool_x\towner-b`);
      const show = await cli('tasks', 'show', b1);
      expect(show.code).toBe(0);
      expect(show.out).toContain(`status: working`);
      expect(show.out + (await cli('tasks', 'show', b1, '--json')).out).not.toContain('not-for-operators');
    });

    it('show and cancel of an unknown id exit 1 with a clear message', async () => {
      for (const cmd of ['show', 'cancel']) {
        const r = await cli('tasks', cmd, 'no-such-task');
        expect(r).toEqual({ code: 1, out: '', err: 'no task with id no-such-task' });
      }
    });

    it('cancels with the server lock: the row changes, the generation moves, the server hears it', async () => {
      const heard: unknown[] = [];
      const bus = app.get(PgBusService);
      const off = bus.subscribe(TASK_CHANNEL, (p) => heard.push(p));
      await bus.listening();
      try {
        const r = await cli('tasks', 'cancel', a2, '--reason', 'stuck upstream');
        expect(r).toMatchObject({ code: 0, out: `cancelled ${a2}` });
        const row = await withClient(db.url, (c) =>
          c.query<{ status: string; status_message: string; generation: string }>(
            'SELECT status, status_message, generation FROM task WHERE id = $1',
            [a2],
          ),
        );
        expect(row.rows[0]).toEqual({
          status: 'cancelled',
          status_message: 'stuck upstream',
          generation: '2',
        });
        const t0 = Date.now();
        while (heard.length === 0 && Date.now() - t0 < 5000) await new Promise((res) => setTimeout(res, 20));
        expect(heard).toContainEqual(expect.objectContaining({ taskId: a2, status: 'cancelled' }));
      } finally {
        off();
      }
      const again = await cli('tasks', 'cancel', a2);
      expect(again.code).toBe(3);
      expect(again.err).toBe(`task ${a2} is already cancelled; nothing to cancel`);
    });

    it('shows and cancels an id that starts with - when it follows --', async () => {
      // newTaskId() is base64url: 1 id in 64 starts with -, and such an id must still be reachable.
      const id = await newTask('owner-e', 'tool_x', `-${randomBytes(9).toString('base64url')}`);
      const refused = await cli('tasks', 'show', id);
      expect(refused.code).toBe(2);
      expect(refused.err).toContain(`goes after --: show -- ${id}`);
      const show = await cli('tasks', 'show', '--json', '--', id);
      expect(show.code).toBe(0);
      expect(JSON.parse(show.out)).toMatchObject({ id, status: 'working' });
      expect(await cli('tasks', 'cancel', '--reason', 'dash id', '--', id)).toMatchObject({
        code: 0,
        out: `cancelled ${id}`,
      });
      expect(
        (await cli('tasks', 'list', '--owner', 'owner-e', '--status', 'cancelled', '--json')).out,
      ).toContain(id);
    });

    it('a cancel made here is counted once in mcp_tasks_finished_total, by the instance that ran the task', async () => {
      const registry = app.get(MetricsService).registry;
      const cancelled = async (): Promise<number> => {
        const m = await registry.getSingleMetric('mcp_tasks_finished_total')!.get();
        return (
          m.values.find((v) => v.labels.tool === 'tool_count' && v.labels.status === 'cancelled')?.value ?? 0
        );
      };
      const id = await newTask('owner-f', 'tool_count');
      expect(await cancelled()).toBe(0);
      expect((await cli('tasks', 'cancel', id)).code).toBe(0);
      const t0 = Date.now();
      while ((await cancelled()) === 0 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 20));
      expect(await cancelled()).toBe(1);
      // A cancel that did not apply counts nothing.
      expect((await cli('tasks', 'cancel', id)).code).toBe(3);
      await new Promise((r) => setTimeout(r, 200));
      expect(await cancelled()).toBe(1);
    });

    it('many parallel cancels of one task: exactly one applies', async () => {
      const id = await newTask('owner-c', 'tool_x');
      const runs = await Promise.all(Array.from({ length: 8 }, () => cli('tasks', 'cancel', id, '--json')));
      expect(runs.map((r) => r.code).sort()).toEqual([0, 3, 3, 3, 3, 3, 3, 3]);
      const generation = await withClient(db.url, (c) =>
        c.query<{ generation: string }>('SELECT generation FROM task WHERE id = $1', [id]),
      );
      expect(generation.rows[0].generation).toBe('2');
    });
  });

  describe('tasks retry (redrive)', () => {
    it('a failed task becomes a NEW queued task with its tool, arguments and owner, linked both ways', async () => {
      const queued: unknown[] = [];
      const bus = app.get(PgBusService);
      const off = bus.subscribe(TASK_QUEUE_CHANNEL, (p) => queued.push(p));
      await bus.listening();
      try {
        const old = await failedTask('owner-r', 'tool_r');
        const r = await cli('tasks', 'retry', old);
        expect(r).toMatchObject({ code: 0, err: '' });
        const id = r.out;
        expect(id).not.toBe(old);
        const rows = await withClient(db.url, (c) =>
          c.query(
            `SELECT id, owner_id, session_id, era, tool_name, request_params, principal, resumable, max_attempts,
                    attempt, failed_attempts, redriven_from, idempotency_key, ttl_ms, poll_interval_ms,
                    status, instance_id, available_at IS NOT NULL AS was_queued
               FROM task WHERE id = ANY($1) ORDER BY id = $2 DESC`,
            [[old, id], old],
          ),
        );
        const [before, after] = rows.rows;
        expect(after).toEqual({
          ...before,
          id,
          redriven_from: old,
          status: 'working',
          instance_id: null,
          was_queued: true,
          attempt: 1,
          failed_attempts: 0,
        });
        expect(before).toMatchObject({ status: 'failed', resumable: true, max_attempts: 4 });
        // Announced on the queue channel at commit: a running server's claimer wakes for it.
        const t0 = Date.now();
        while (queued.length === 0 && Date.now() - t0 < 5000) await new Promise((res) => setTimeout(res, 20));
        expect(queued).toContainEqual(expect.objectContaining({ taskId: id }));

        // tasks show links both ways; a second retry is one more new task.
        expect((await cli('tasks', 'show', id)).out).toContain(`redrivenFrom: ${old}`);
        const second = await cli('tasks', 'retry', old, '--json');
        const json = JSON.parse(second.out) as { id: string; redrivenFrom: string; status: string };
        expect(json).toEqual({ id: expect.any(String), redrivenFrom: old, status: 'working' });
        const shown = JSON.parse((await cli('tasks', 'show', old, '--json')).out) as Record<string, unknown>;
        expect(shown).toMatchObject({ redrivenFrom: null, redrivenAs: [id, json.id] });
        expect((await cli('tasks', 'show', old)).out).toContain(
          `redrivenAs: ${JSON.stringify([id, json.id])}`,
        );
      } finally {
        off();
      }
    });

    it('refuses a live task (exit 3) and an unknown one (exit 1); the creation limits hold', async () => {
      const live = await newTask('owner-l', 'tool_r');
      expect(await cli('tasks', 'retry', live)).toEqual({
        code: 3,
        out: '',
        err:
          `task ${live} is still working: only a completed, failed or cancelled task can be retried ` +
          `(cancel it first: tasks cancel ${live})`,
      });
      expect(await cli('tasks', 'retry', 'no-such-task')).toEqual({
        code: 1,
        out: '',
        err: 'no task with id no-such-task',
      });
      // owner-l has one live task: with TASK_MAX_PER_OWNER = 1 a redrive would be its second.
      const old = await failedTask('owner-l', 'tool_r');
      expect(await cliWith({ TASK_MAX_PER_OWNER: '1' }, 'tasks', 'retry', old)).toEqual({
        code: 1,
        out: '',
        err: 'Too many live tasks for this caller (TASK_MAX_PER_OWNER = 1)',
      });
      expect(
        await withClient(db.url, (c) => c.query('SELECT id FROM task WHERE redriven_from = $1', [old])),
      ).toMatchObject({ rowCount: 0 });
    });
  });

  it('sessions: lists live ones, ends one (then it is gone for the server too), refuses twice', async () => {
    const repo = app.get(SessionsRepository);
    const id = `s-${randomBytes(8).toString('hex')}`;
    await repo.create({
      id,
      principalId: 'user:ops-test',
      protocolVersion: '2025-11-25',
      clientCapabilities: {},
      clientInfo: { name: 'probe-client', version: '1' },
    });
    const listed = await cli('sessions', 'list', '--principal', 'user:ops-test', '--json');
    expect(JSON.parse(listed.out)).toEqual([
      expect.objectContaining({ id, clientName: 'probe-client', endedAt: null }),
    ]);
    // The running server has the session in memory (it just served it): the CLI's end must reach it.
    const service = app.get(SessionsService);
    const principal = { id: 'user:ops-test' } as Parameters<SessionsService['resolve']>[1];
    await service.resolve(id, principal);
    expect(service.cachedSessions).toBeGreaterThan(0);
    expect(await cli('sessions', 'end', id)).toMatchObject({ code: 0, out: `ended ${id}` });
    expect(await repo.findLive(id, 'user:ops-test', 3_600_000, 60_000)).toBeNull();
    await expect(service.resolve(id, principal)).rejects.toMatchObject({ message: 'Session not found' });
    expect(JSON.parse((await cli('sessions', 'list', '--principal', 'user:ops-test', '--json')).out)).toEqual(
      [],
    );
    expect(
      JSON.parse((await cli('sessions', 'list', '--principal', 'user:ops-test', '--all', '--json')).out),
    ).toEqual([expect.objectContaining({ id, endedAt: expect.any(String) })]);
    expect((await cli('sessions', 'end', id)).code).toBe(3);
    expect(await cli('sessions', 'end', 'nope')).toMatchObject({ code: 1, err: 'no session with id nope' });
  });

  it('apikey: --json on create and list, revoke twice exits 0 then 3, an unknown id 1', async () => {
    const created = await cli('apikey', 'create', '--name', 'json-bot', '--scopes', 'tasks:read', '--json');
    expect(created.code).toBe(0);
    const key = JSON.parse(created.out) as { id: string; key: string; principalId: string; scopes: string[] };
    expect(key).toMatchObject({ name: 'json-bot', scopes: ['tasks:read'], principalId: `apikey:${key.id}` });
    expect(key.key).toMatch(/^mcpk_/);
    const listed = await cli('apikey', 'list', '--json');
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.out)).toContainEqual(
      expect.objectContaining({ id: key.id, name: 'json-bot', revokedAt: null }),
    );
    expect(listed.out).not.toContain(key.key);
    expect(await cli('apikey', 'revoke', key.id)).toMatchObject({ code: 0, out: `revoked ${key.id}` });
    const again = await cli('apikey', 'revoke', key.id, '--json');
    expect(again.code).toBe(3);
    expect(JSON.parse(again.out)).toEqual({ revoked: false, id: key.id });
    expect(again.err).toMatch(/already revoked/);
    expect(await cli('apikey', 'revoke', 'nokey')).toMatchObject({
      code: 1,
      err: 'no API key with id nokey',
    });
    expect((await cli('apikey', 'create', '--scopes', 'a')).code).toBe(2);
  });

  it('principals: turns a user name or email into the principal id that --owner takes', async () => {
    await withClient(db.url, (c) =>
      c.query(
        `INSERT INTO principal (id, provider, issuer, subject, display_name, email, created_at, last_seen_at)
         VALUES ('oidc:9f2c1e', 'oidc', 'https://idp.example.com', 'u-4711', 'Ada Lovelace', 'ada@example.com', now(), now()),
                ('proxy:bob', 'proxy', NULL, 'bob', 'Bob_100%', NULL, now(), now())`,
      ),
    );
    const byName = await cli('principals', 'list', '--name', 'lovelace', '--json');
    expect(byName.code).toBe(0);
    expect(JSON.parse(byName.out)).toEqual([
      expect.objectContaining({ id: 'oidc:9f2c1e', displayName: 'Ada Lovelace', email: 'ada@example.com' }),
    ]);
    const byEmail = await cli('principals', 'list', '--name', 'ADA@example');
    expect(byEmail.out.split('\n')).toEqual([
      'id\tprovider\tname\temail\tlast_seen',
      expect.stringMatching(/^oidc:9f2c1e\toidc\tAda Lovelace\tada@example.com\t/),
    ]);
    // LIKE wildcards in the input are literal: `_` and `%` match only themselves.
    expect(JSON.parse((await cli('principals', 'list', '--name', '_100%', '--json')).out)).toEqual([
      expect.objectContaining({ id: 'proxy:bob' }),
    ]);
    expect(JSON.parse((await cli('principals', 'list', '--name', 'b_b', '--json')).out)).toEqual([]);
    expect(
      JSON.parse((await cli('principals', 'list', '--provider', 'proxy', '--json')).out).map(
        (p: { id: string }) => p.id,
      ),
    ).toEqual(['proxy:bob']);
  });

  it('runs in a production environment that serves nothing (HOST=0.0.0.0, no AUTH_PROVIDERS)', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(
      ['instances', 'list', '--json'],
      { NODE_ENV: 'production', HOST: '0.0.0.0', DATABASE_URL: db.url },
      { out: (l) => out.push(l), err: (l) => err.push(l) },
    );
    expect({ code, err }).toEqual({ code: 0, err: [] });
    expect(Array.isArray(JSON.parse(out.join('\n')))).toBe(true);
  });

  it('migrations: run applies them under the lock on a fresh database, a rerun is a success with nothing to do', async () => {
    const fresh = await createTestDatabase('cli_migrate');
    try {
      const run = async (...argv: string[]): Promise<CliRun> => {
        const out: string[] = [];
        const err: string[] = [];
        // A direct DATABASE_LISTEN_URL wins over DATABASE_URL (which may be a transaction-mode pooler).
        const env = { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/pooler', DATABASE_LISTEN_URL: fresh.url };
        const code = await runCli(argv, env, { out: (l) => out.push(l), err: (l) => err.push(l) });
        return { code, out: out.join('\n'), err: err.join('\n') };
      };
      const pending = JSON.parse((await run('migrations', 'show', '--json')).out) as { pending: string[] };
      expect(pending.pending.length).toBeGreaterThan(0);
      const first = await run('migrations', 'run', '--json');
      expect(first.code).toBe(0);
      expect(JSON.parse(first.out)).toEqual({ applied: pending.pending });
      expect(await run('migrations', 'run')).toMatchObject({
        code: 0,
        out: 'nothing to apply: the schema is current',
      });
      expect(await run('migrations', 'show')).toMatchObject({
        code: 0,
        out: 'nothing pending: the schema is current',
      });
    } finally {
      await fresh.drop();
    }
  });

  it('instances: shows the running server as alive with the live tasks it holds', async () => {
    // Held: leased to it. Queued tasks (tasks retry) are live but held by no instance.
    const live = await withClient(db.url, (c) =>
      c.query<{ n: string }>(
        `SELECT count(*) AS n FROM task WHERE status IN ('working', 'input_required') AND instance_id = $1`,
        [app.get(InstancesService).instanceId],
      ),
    );
    const r = await cli('instances', 'list', '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual([
      expect.objectContaining({
        id: app.get(InstancesService).instanceId,
        state: 'alive',
        role: 'web', // the server beside this CLI runs with INSTANCE_ROLE=web (see beforeAll)
        liveTasks: Number(live.rows[0].n),
      }),
    ]);
  });

  it('janitor run-once: the server sweep fails an expired task and reports it', async () => {
    const id = await newTask('owner-d', 'tool_x');
    await withClient(db.url, (c) =>
      c.query(`UPDATE task SET expires_at = now() - interval '5 seconds' WHERE id = $1`, [id]),
    );
    const r = await cli('janitor', 'run-once', '--json');
    expect(r.code).toBe(0);
    const report = JSON.parse(r.out);
    expect(report.result).toBe('ok');
    expect(report.rows.expire).toBeGreaterThanOrEqual(1);
    const row = await withClient(db.url, (c) => c.query('SELECT status FROM task WHERE id = $1', [id]));
    expect(row.rows[0].status).toBe('failed');
  });

  it.each([
    [['tasks', 'list', '--status', 'bogus'], /--status must be among/],
    [['tasks', 'list', '--older-than', 'yesterday'], /duration such as/],
    [['tasks', 'list', '--frob'], /unknown option --frob/],
    [['tasks', 'cancel'], /missing TASK_ID/],
    [['tasks', 'explode'], /unknown tasks command explode/],
    [['sessions', 'list', '--limit', '0'], /--limit must be an integer/],
    [['instances'], /instances needs a command/],
    [['janitor', 'run-twice'], /unknown janitor command/],
  ])('usage error %j exits 2', async (argv, message) => {
    const r = await cli(...argv);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
    expect(r.err).toContain('usage: npm run cli');
  });

  describe('as a process', () => {
    const run = async (...argv: string[]): Promise<CliRun> => {
      try {
        const { stdout, stderr } = await promisify(execFile)(
          process.execPath,
          [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), ...argv],
          { env: { PATH: process.env.PATH, DATABASE_URL: db.url } },
        );
        return { code: 0, out: stdout, err: stderr };
      } catch (e) {
        const err = e as { code: number; stdout: string; stderr: string };
        return { code: err.code, out: err.stdout, err: err.stderr };
      }
    };

    it('exits 0 with JSON on stdout, 1 for an unknown task, 2 for an unknown command', async () => {
      const list = await run('instances', 'list', '--json');
      expect(list.code).toBe(0);
      expect(Array.isArray(JSON.parse(list.out))).toBe(true);
      const missing = await run('tasks', 'show', 'nope');
      expect(missing).toMatchObject({ code: 1, out: '' });
      expect(missing.err).toContain('no task with id nope');
      const bad = await run('frobnicate');
      expect(bad.code).toBe(2);
      expect(bad.err).toContain('unknown command frobnicate');
    });

    it('npm run cli runs the existing build and never deletes dist/ under a running server', async () => {
      const marker = join(REPO_ROOT, 'dist', `.cli-marker-${randomBytes(4).toString('hex')}`);
      writeFileSync(marker, 'a server runs from this dist/');
      const main = statSync(join(REPO_ROOT, 'dist', 'src', 'main.js'));
      try {
        const { stdout } = await promisify(execFile)('npm', ['run', '--silent', 'cli', '--', 'help'], {
          cwd: REPO_ROOT,
          env: { PATH: process.env.PATH, HOME: process.env.HOME },
        });
        expect(stdout).toContain('usage: npm run cli');
        expect(existsSync(marker)).toBe(true);
        expect(statSync(join(REPO_ROOT, 'dist', 'src', 'main.js')).ino).toBe(main.ino);
      } finally {
        rmSync(marker, { force: true });
      }
    });

    it('exits 1 with a clear message when the database is unreachable', async () => {
      const { stderr, code } = await promisify(execFile)(
        process.execPath,
        [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), 'tasks', 'list'],
        { env: { PATH: process.env.PATH, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' } },
      ).then(
        (r) => ({ ...r, code: 0 }),
        (e: { code: number; stderr: string }) => e,
      );
      expect(code).toBe(1);
      expect(stderr).toMatch(/cannot connect to the database/);
    });
  });
});
