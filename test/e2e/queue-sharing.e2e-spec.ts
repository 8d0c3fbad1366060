import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { responseOf } from '../support/mcp-http.js';
import { REPO_ROOT, startServer, stopServer, type ServerProcess } from '../support/server-process.js';
import { asUser, freshUser, LegacyClient, modern, PROXY_SECRET, waitFor } from '../support/tasks-e2e.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

const run = promisify(execFile);
const CLI = join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js');

/** A task as a client follows it: its id and how to read it (tasks/get of its era). */
interface Followed {
  taskId: string;
  createdAt: number;
  read(): Promise<{ status: string; statusMessage?: string | null }>;
  /** The tool's result once it completed (tasks/result, or the task's inlined result in the 2026-07-28 era). */
  result(): Promise<Record<string, any>>;
}

/** When limited_job ran, from its structured result. */
interface Run {
  startedAt: number;
  finishedAt: number;
  key: string;
}

/** The most runs that overlapped at any moment. */
function maxOverlap(runs: Run[]): number {
  const edges = runs.flatMap((r) => [
    { at: r.startedAt, d: 1 },
    { at: r.finishedAt, d: -1 },
  ]);
  // An end and a start at the same millisecond do not overlap: ends first.
  edges.sort((a, b) => a.at - b.at || a.d - b.d);
  let now = 0;
  let most = 0;
  for (const e of edges) {
    now += e.d;
    most = Math.max(most, now);
  }
  return most;
}

/** A series of a spawned server's /metrics: the value of the line with exactly these labels (NaN if none). */
/** The value of one series in a /metrics text; NaN when it is not there. */
function sample(text: string, name: string, labels: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
  return line === undefined ? NaN : Number(line.split(' ').pop());
}

async function metric(server: ServerProcess, name: string, labels: string): Promise<number> {
  return sample(await (await fetch(`${server.baseUrl}/metrics`)).text(), name, labels);
}

/**
 * Sharing the task queue, with the built server spawned as real processes on one database (issue 38): fair
 * shares across principals on one and on two instances, limited_job's cluster-wide limits in both eras, and
 * pausing and resuming a tool's queue with the operator CLI while calls go through another instance.
 */
describe('sharing the task queue (spawned servers, one database)', () => {
  let db: TestDatabase;
  const servers: ServerProcess[] = [];
  const start = async (env: Record<string, string> = {}): Promise<ServerProcess> => {
    const s = await startServer({
      DATABASE_URL: db.url,
      MCP_CONFORMANCE_FIXTURES: 'true',
      INSTANCE_HEARTBEAT_MS: '1000',
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      // The 200-call test polls hundreds of tasks from one test process.
      RATE_LIMIT_PRINCIPAL_RPS: '10000',
      ...env,
    });
    servers.push(s);
    return s;
  };

  beforeEach(async () => {
    db = await createTestDatabase('queue_sharing_e2e');
  });
  afterEach(async () => {
    for (const s of servers.splice(0)) await stopServer(s, 'SIGKILL');
    await db.drop();
  });

  /** A legacy task of `tool`, created by `user` through `url`. */
  const legacyTask = async (
    client: LegacyClient,
    tool: string,
    args: Record<string, unknown>,
  ): Promise<Followed> => {
    const t = await client.createTask(tool, args);
    return {
      taskId: t.taskId,
      createdAt: Date.now(),
      read: () => client.result('tasks/get', { taskId: t.taskId }),
      result: () => client.result('tasks/result', { taskId: t.taskId }),
    };
  };

  /** A 2026-07-28 call of `tool` by `user` through `url`: inline when it ended in its window, else a task. */
  const modernTask = async (
    url: string,
    user: string,
    tool: string,
    args: Record<string, unknown>,
  ): Promise<Followed> => {
    const createdAt = Date.now();
    const answer = responseOf(
      await modern(url, 'tools/call', { name: tool, arguments: args }, { headers: asUser(user) }),
    );
    if (!answer.result) throw new Error(`tools/call ${tool} failed: ${JSON.stringify(answer)}`);
    const r = answer.result;
    const get = async (): Promise<any> => {
      const got = responseOf(await modern(url, 'tasks/get', { taskId: r.taskId }, { headers: asUser(user) }));
      if (!got.result) throw new Error(`tasks/get ${r.taskId} failed: ${JSON.stringify(got)}`);
      return got.result;
    };
    if (r.resultType !== 'task') {
      return {
        taskId: '',
        createdAt,
        read: () => Promise.resolve({ status: 'completed' }),
        result: () => Promise.resolve(r),
      };
    }
    return {
      taskId: r.taskId,
      createdAt,
      read: get,
      result: async () => {
        const t = await waitFor(get, (x) => x.status !== 'working', {
          timeoutMs: 60000,
          intervalMs: 200,
          what: 'the task to end',
        });
        expect(t.status).toBe('completed');
        return t.result;
      },
    };
  };

  const completedWithin = async (t: Followed, ms: number): Promise<number> => {
    await waitFor(
      () => t.read(),
      (x) => x.status === 'completed',
      { timeoutMs: ms + 5000, intervalMs: 100 },
    );
    return Date.now() - t.createdAt;
  };

  /** Running tasks now by the first letter of their label (a, b, c: whose they are), as the database sees them. */
  const runningByTeam = (): Promise<Record<string, number>> =>
    withClient(db.url, async (c) => {
      const { rows } = await c.query<{ team: string; n: number }>(
        `SELECT left(request_params->'arguments'->>'label', 1) AS team, count(*)::int AS n FROM task
          WHERE status = 'working' AND instance_id IS NOT NULL GROUP BY 1`,
      );
      return Object.fromEntries(rows.map((r) => [r.team, r.n]));
    });

  it("one instance with 2 slots: B's two tasks run while A's sixteen wait, and all of A's complete", async () => {
    const server = await start({ TASK_WORKER_CONCURRENCY: '2' });
    const a = await LegacyClient.open(`${server.baseUrl}/mcp`, {}, asUser(freshUser('team-a')));
    const b = await LegacyClient.open(`${server.baseUrl}/mcp`, {}, asUser(freshUser('team-b')));
    const aTasks: Followed[] = [];
    for (let i = 0; i < 16; i++)
      aTasks.push(await legacyTask(a, 'slow_compute', { seconds: 2, label: `a${i}` }));
    const bTasks = await Promise.all(
      [0, 1].map((i) => legacyTask(b, 'slow_compute', { seconds: 1, label: `b${i}` })),
    );
    const bTimes = await Promise.all(bTasks.map((t) => completedWithin(t, 6000)));
    // First come, first served, B would wait behind all sixteen: about 17 s.
    for (const ms of bTimes) expect(ms).toBeLessThan(6000);
    for (const t of aTasks) await completedWithin(t, 40000);
  }, 90000);

  it("two instances: C's tasks go first, and A and B share the slots evenly while both wait", async () => {
    const one = await start({ TASK_WORKER_CONCURRENCY: '2' });
    const two = await start({ TASK_WORKER_CONCURRENCY: '2' });
    const users = { a: freshUser('a'), b: freshUser('b'), c: freshUser('c') };
    const a = await LegacyClient.open(`${one.baseUrl}/mcp`, {}, asUser(users.a));
    const b = await LegacyClient.open(`${two.baseUrl}/mcp`, {}, asUser(users.b));
    const c = await LegacyClient.open(`${two.baseUrl}/mcp`, {}, asUser(users.c));
    await Promise.all(
      Array.from({ length: 12 }, (_, i) => [
        legacyTask(a, 'slow_compute', { seconds: 2, label: `a${i}` }),
        legacyTask(b, 'slow_compute', { seconds: 2, label: `b${i}` }),
      ]).flat(),
    );
    // While both have work waiting, the four slots go two and two (one more either way while a slot turns).
    // The first wave is left out: those slots were taken by whichever creations came first, before anything
    // waited (fairness decides only when work waits); from its end on, each freed slot is given fairly.
    const samples: Record<string, number>[] = [];
    const sampling = (async () => {
      await new Promise((r) => setTimeout(r, 2500));
      for (let i = 0; i < 20; i++) {
        samples.push(await runningByTeam());
        await new Promise((r) => setTimeout(r, 150));
      }
    })();
    await new Promise((r) => setTimeout(r, 1000));
    const cTasks = await Promise.all(
      [0, 1].map((i) => legacyTask(c, 'slow_compute', { seconds: 1, label: `c${i}` })),
    );
    const cTimes = await Promise.all(cTasks.map((t) => completedWithin(t, 4000)));
    for (const ms of cTimes) expect(ms).toBeLessThan(4000);
    await sampling;
    const busy = samples.filter((s) => (s.a ?? 0) + (s.b ?? 0) > 0);
    expect(busy.length).toBeGreaterThan(10);
    for (const s of busy) expect(Math.abs((s.a ?? 0) - (s.b ?? 0))).toBeLessThanOrEqual(1);
  }, 90000);

  it("TASK_FAIR_SHARE=tenant: the principals of one tenant (the SSO proxy's header) share one share", async () => {
    const server = await start({
      TASK_WORKER_CONCURRENCY: '2',
      TASK_FAIR_SHARE: 'tenant',
      AUTH_PROXY_TENANT_HEADER: 'x-forwarded-tenant',
    });
    const url = `${server.baseUrl}/mcp`;
    const member = (user: string, tenant?: string) => ({
      ...asUser(user),
      ...(tenant ? { 'x-forwarded-tenant': tenant } : {}),
    });
    // Two service accounts of team acme queue four tasks each, then one of team globex four.
    const a1 = await LegacyClient.open(url, {}, member(freshUser('acme-bot'), 'acme'));
    const a2 = await LegacyClient.open(url, {}, member(freshUser('acme-etl'), 'acme'));
    const b = await LegacyClient.open(url, {}, member(freshUser('globex'), 'globex'));
    for (const [client, team] of [
      [a1, 'a'],
      [a2, 'a'],
      [b, 'b'],
    ] as const) {
      for (let i = 0; i < 4; i++)
        await legacyTask(client, 'slow_compute', { seconds: 1, label: `${team}${i}` });
    }
    const keys = await withClient(db.url, (c) =>
      c.query<{ k: string; n: number }>(
        `SELECT fairness_key AS k, count(*)::int AS n FROM task GROUP BY 1 ORDER BY 1`,
      ),
    );
    expect(keys.rows).toEqual([
      { k: 'tenant:acme', n: 8 },
      { k: 'tenant:globex', n: 4 },
    ]);
    // Each freed slot goes to the tenant with fewer running: globex always has one of the two slots once
    // acme's first two (started at once on free slots) are done.
    await new Promise((r) => setTimeout(r, 1500));
    const samples: Record<string, number>[] = [];
    for (let i = 0; i < 10; i++) {
      samples.push(await runningByTeam());
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(samples.filter((s) => s.b === 1).length).toBeGreaterThanOrEqual(8);
  }, 60000);

  it('limited_job through two instances and both eras: at most 2 at once, 1 per key, and 2 at once while others wait', async () => {
    const one = await start();
    const two = await start();
    const user = freshUser('limits');
    const legacy = await LegacyClient.open(`${one.baseUrl}/mcp`, {}, asUser(user));
    const distinct = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        i % 2 === 0
          ? legacyTask(legacy, 'limited_job', { ms: 600, key: `k${i}` })
          : modernTask(`${two.baseUrl}/mcp`, user, 'limited_job', { ms: 600, key: `k${i}` }),
      ),
    );
    // A task waiting for the limit says so while it waits.
    const waiting = distinct.filter((t) => t.taskId);
    await waitFor(
      () => Promise.all(waiting.map((t) => t.read())),
      (all) =>
        all.some(
          (m) => m.status === 'working' && /limit of 2 runs of limited_job/.test(m.statusMessage ?? ''),
        ),
      { what: 'a task waiting for the limit of limited_job', timeoutMs: 5000, intervalMs: 20 },
    );
    // The gauges say the same, from either instance (read from the database).
    // One scrape: its numbers are one snapshot of the database. limited_job declares 1 per key, so each of the
    // two runs holds its key at the limit.
    const scrape = await (await fetch(`${two.baseUrl}/metrics`)).text();
    expect(sample(scrape, 'mcp_tool_limit_capacity', 'tool="limited_job",limit="concurrency"')).toBe(2);
    expect(sample(scrape, 'mcp_tool_limit_in_use', 'tool="limited_job",limit="concurrency"')).toBe(2);
    expect(sample(scrape, 'mcp_tool_limit_per_key_saturated', 'tool="limited_job"')).toBe(2);
    expect(await metric(one, 'mcp_task_queue_waiting', 'tool="limited_job",reason="limit"')).toBeGreaterThan(
      0,
    );
    const runs: Run[] = (await Promise.all(distinct.map((t) => t.result()))).map((r) => r.structuredContent);
    expect(maxOverlap(runs)).toBe(2);
    expect(await metric(one, 'mcp_tool_limit_in_use', 'tool="limited_job",limit="concurrency"')).toBe(0);
    expect(await metric(one, 'mcp_tool_limit_per_key_saturated', 'tool="limited_job"')).toBe(0);
    const sameKey = await Promise.all(
      Array.from({ length: 3 }, (_, i) =>
        i === 1
          ? modernTask(`${two.baseUrl}/mcp`, user, 'limited_job', { ms: 400, key: 'one' })
          : legacyTask(legacy, 'limited_job', { ms: 400, key: 'one' }),
      ),
    );
    const keyed: Run[] = (await Promise.all(sameKey.map((t) => t.result()))).map((r) => r.structuredContent);
    expect(maxOverlap(keyed)).toBe(1);
    // A plain call (no task requested) of a limited tool waits for its turn through the queue too.
    const plain = await legacy.result('tools/call', {
      name: 'limited_job',
      arguments: { ms: 0, key: 'one' },
    });
    expect(plain.structuredContent.key).toBe('one');
  }, 90000);

  it('200 concurrent calls through two instances never exceed the limits', async () => {
    const one = await start({ TASK_WORKER_CONCURRENCY: '8' });
    const two = await start({ TASK_WORKER_CONCURRENCY: '8' });
    const users = [0, 1, 2, 3].map((i) => freshUser(`burst${i}`));
    const legacies = await Promise.all(
      users.map((u) => LegacyClient.open(`${one.baseUrl}/mcp`, {}, asUser(u))),
    );
    const calls = await Promise.all(
      Array.from({ length: 200 }, (_, i) => {
        const args = { ms: 10 + (i % 4) * 10, key: `key${i % 5}` };
        return i % 2 === 0
          ? legacyTask(legacies[i % 4], 'limited_job', args)
          : modernTask(`${two.baseUrl}/mcp`, users[i % 4], 'limited_job', args);
      }),
    );
    const runs: Run[] = (await Promise.all(calls.map((t) => t.result()))).map((r) => r.structuredContent);
    expect(runs).toHaveLength(200);
    expect(maxOverlap(runs)).toBeLessThanOrEqual(2);
    for (const key of ['key0', 'key1', 'key2', 'key3', 'key4']) {
      expect(maxOverlap(runs.filter((r) => r.key === key))).toBe(1);
    }
  }, 120000);

  it('pause and resume through the CLI hold and release calls made through another instance, in both eras', async () => {
    const one = await start();
    const two = await start();
    const env = {
      ...process.env,
      DATABASE_URL: db.url,
      MCP_CONFORMANCE_FIXTURES: 'true',
      MCP_OPERATOR: 'ops:alice',
    };
    const cli = (...args: string[]) => run(process.execPath, [CLI, ...args], { env });
    const user = freshUser('paused');
    const legacy = await LegacyClient.open(`${two.baseUrl}/mcp`, {}, asUser(user));
    const running = await legacyTask(legacy, 'slow_compute', { seconds: 2, label: 'before' });
    await waitFor(
      () => running.read(),
      (t) => t.status === 'working' && !/Queued/.test(t.statusMessage ?? ''),
    );

    await expect(cli('queue', 'pause', 'slow_compute')).resolves.toMatchObject({
      stdout: expect.stringMatching(/slow_compute paused/),
    });
    const held = [
      await legacyTask(legacy, 'slow_compute', { seconds: 0, label: 'held-legacy' }),
      await modernTask(`${one.baseUrl}/mcp`, user, 'slow_compute', { seconds: 0, label: 'held-modern' }),
    ];
    expect(held[1].taskId).not.toBe('');
    await new Promise((r) => setTimeout(r, 1500));
    for (const t of held) {
      const now = await t.read();
      expect(now.status).toBe('working');
      expect(now.statusMessage).toMatch(/paused/);
    }
    expect(await metric(one, 'mcp_tool_queue_paused', 'tool="slow_compute"')).toBe(1);
    expect(await metric(two, 'mcp_task_queue_waiting', 'tool="slow_compute",reason="paused"')).toBe(2);
    // The run that started before the pause finished.
    await completedWithin(running, 5000);
    const status = JSON.parse((await cli('queue', 'status', '--json')).stdout);
    const row = status.tools.find((t: { tool: string }) => t.tool === 'slow_compute');
    expect(row).toMatchObject({ paused: true, running: 0, waiting: 2, waitingBy: { paused: 2 } });
    expect(status.fairnessKeys.some((k: { waiting: number }) => k.waiting === 2)).toBe(true);

    await expect(cli('queue', 'pause', 'no_such_tool')).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('no_such_tool'),
    });
    await expect(cli('queue', 'pause', 'test_simple_text')).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('test_simple_text'),
    });

    await expect(cli('queue', 'resume', 'slow_compute')).resolves.toMatchObject({
      stdout: expect.stringMatching(/resumed: 2/),
    });
    for (const t of held) await completedWithin(t, 5000);
    expect(await metric(two, 'mcp_tool_queue_paused', 'tool="slow_compute"')).toBe(0);
    // Both ran from the queue: the time from claimable to running is observed by tool.
    expect(
      (await metric(one, 'mcp_task_claim_wait_seconds_count', 'tool="slow_compute"')) +
        (await metric(two, 'mcp_task_claim_wait_seconds_count', 'tool="slow_compute"')),
    ).toBeGreaterThanOrEqual(2);
    const audit = await withClient(db.url, (c) =>
      c.query<{ kind: string; principal: string; tool: string }>(
        `SELECT kind, principal, tool FROM mcp_audit_event WHERE kind LIKE 'queue.%' ORDER BY id`,
      ),
    );
    expect(audit.rows).toEqual([
      { kind: 'queue.paused', principal: 'ops:alice', tool: 'slow_compute' },
      { kind: 'queue.resumed', principal: 'ops:alice', tool: 'slow_compute' },
    ]);
  }, 90000);
});
