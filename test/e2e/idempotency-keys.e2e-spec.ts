import { randomBytes } from 'node:crypto';
import { principalIdFor } from '../../src/principals/principals.service.js';
import { responseOf, type RpcAnswer } from '../support/mcp-http.js';
import { startServer, stopServer, type ServerProcess } from '../support/server-process.js';
import { asUser, freshUser, LegacyClient, modern, PROXY_SECRET, waitFor } from '../support/tasks-e2e.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

const STATE_SECRET = 'e2e-idempotency-state-secret-0123456789';
/** Long enough for protocol_error_job (300 ms) to fail inside it, short enough for slow_compute 3 s. */
const INLINE_WINDOW_MS = 1000;

function newKey(): string {
  return `key-${randomBytes(8).toString('hex')}`;
}

/** The sum of one counter's samples with these labels on both instances' /metrics. */
async function counterSum(urls: string[], name: string, labels: Record<string, string>): Promise<number> {
  let sum = 0;
  for (const base of urls) {
    const text = await (await fetch(`${base}/metrics`)).text();
    for (const line of text.split('\n')) {
      if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
      const labelText = line.slice(name.length, line.lastIndexOf(' '));
      if (Object.entries(labels).every(([k, v]) => labelText.includes(`${k}="${v}"`))) {
        sum += Number(line.slice(line.lastIndexOf(' ') + 1));
      }
    }
  }
  return sum;
}

/**
 * Idempotency-Key on task-creating tools/call (issue 22, item 8), with two real server processes on one
 * database behind no sticky routing: the identity is (principal, key) → tool and arguments, kept by a
 * unique index, so a repeat on either instance finds the same task and nothing runs twice.
 */
describe('Idempotency-Key across two server processes (both eras)', () => {
  let db: TestDatabase;
  let a: ServerProcess;
  let b: ServerProcess;
  let urls: string[];

  const mcp = (i: number): string => `${urls[i % 2]}/mcp`;
  const keyed = (user: string, key: string): Record<string, string> => ({
    ...asUser(user),
    'idempotency-key': key,
  });
  const modernCall = (i: number, user: string, key: string, name: string, args: Record<string, unknown>) =>
    modern(mcp(i), 'tools/call', { name, arguments: args }, { headers: keyed(user, key) });

  async function ownerTasks(
    user: string,
  ): Promise<{ id: string; status: string; idempotency_key: string }[]> {
    return withClient(db.url, async (c) => {
      const r = await c.query<{ id: string; status: string; idempotency_key: string }>(
        `SELECT id, status, idempotency_key FROM task WHERE owner_id = $1 ORDER BY created_at`,
        [principalIdFor({ provider: 'proxy', subject: user })],
      );
      return r.rows;
    });
  }

  beforeAll(async () => {
    db = await createTestDatabase('idem');
    const env = {
      DATABASE_URL: db.url,
      MCP_CONFORMANCE_FIXTURES: 'true',
      MRTR_STATE_SECRET: STATE_SECRET,
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      TASK_INLINE_WINDOW_MS: String(INLINE_WINDOW_MS),
    };
    a = await startServer(env);
    b = await startServer(env);
    urls = [a.baseUrl, b.baseUrl];
  });
  afterAll(async () => {
    await Promise.all([a && stopServer(a), b && stopServer(b)]);
    await db.drop();
  });

  it('20 concurrent identical modern calls with one key over both instances: one task, one run', async () => {
    const user = freshUser('idem');
    const key = newKey();
    const before = await counterSum(urls, 'mcp_tasks_created_total', { tool: 'slow_compute' });
    const runsBefore = await counterSum(urls, 'mcp_task_runs_started_total', { tool: 'slow_compute' });
    const args = { seconds: 3, label: 'once' };
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => modernCall(i, user, key, 'slow_compute', args)),
    );
    const ids = new Set(
      answers.map((r: RpcAnswer) => {
        expect(r.json.result).toMatchObject({ resultType: 'task', status: 'working' });
        return r.json.result.taskId as string;
      }),
    );
    expect(ids.size).toBe(1);
    const [taskId] = [...ids];
    expect(await ownerTasks(user)).toEqual([{ id: taskId, status: 'working', idempotency_key: key }]);
    expect((await counterSum(urls, 'mcp_tasks_created_total', { tool: 'slow_compute' })) - before).toBe(1);
    expect(
      (await counterSum(urls, 'mcp_task_runs_started_total', { tool: 'slow_compute' })) - runsBefore,
    ).toBe(1);

    // Finished: a repeat on either instance answers with the recorded result inline (an optional tool).
    await waitFor(
      () => ownerTasks(user),
      (rows) => rows[0]?.status === 'completed',
      { what: 'the task to complete' },
    );
    for (const i of [0, 1]) {
      const again = await modernCall(i, user, key, 'slow_compute', { label: 'once', seconds: 3 });
      expect(again.json.result.content[0].text).toBe('Computed once after 3 s');
    }
    expect(await ownerTasks(user)).toHaveLength(1);
  }, 30_000);

  it('20 concurrent identical legacy calls with one key over both instances: one task handle', async () => {
    const user = freshUser('idem-legacy');
    const key = newKey();
    const client = await LegacyClient.open(mcp(0), {}, keyed(user, key));
    const call = (i: number, ttl: number) =>
      client
        .at(mcp(i))
        .result('tools/call', { name: 'slow_compute', arguments: { seconds: 2 }, task: { ttl } });
    // The ttl is not part of the identity: repeats that ask for another one find the same task.
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => call(i, 60_000 + i)));
    const ids = new Set(results.map((r) => (r.task as { taskId: string }).taskId));
    expect(ids.size).toBe(1);
    expect(await ownerTasks(user)).toHaveLength(1);
    // A repeat once it finished still answers { task } (the legacy era always does), now completed.
    await waitFor(
      () => ownerTasks(user),
      (rows) => rows[0]?.status === 'completed',
      { what: 'the task to complete' },
    );
    const again = await call(1, 5000);
    expect(again.task).toMatchObject({ taskId: [...ids][0], status: 'completed' });
  }, 30_000);

  it('the same key with other arguments or another tool is -32602 naming the key, in both eras', async () => {
    const user = freshUser('idem-conflict');
    const key = newKey();
    const first = await modernCall(0, user, key, 'slow_compute', { seconds: 2 });
    expect(first.json.result.resultType).toBe('task');
    const conflict = {
      code: -32602,
      message: expect.stringContaining(`Idempotency-Key '${key}'`),
      data: { idempotencyKey: key },
    };
    const otherArgs = await modernCall(1, user, key, 'slow_compute', { seconds: 3 });
    expect(otherArgs.json.error).toEqual(conflict);
    const otherTool = await modernCall(0, user, key, 'protocol_error_job', {});
    expect(otherTool.json.error).toEqual(conflict);
    const legacy = await LegacyClient.open(mcp(1), {}, keyed(user, key));
    const legacyConflict = await legacy.call('tools/call', {
      name: 'slow_compute',
      arguments: { seconds: 5 },
      task: {},
    });
    expect(legacyConflict.error).toEqual(conflict);
    expect(await ownerTasks(user)).toHaveLength(1);
  });

  it("another principal's use of the same key is an independent task", async () => {
    const key = newKey();
    const [alice, bob] = [freshUser('alice'), freshUser('bob')];
    const args = { seconds: 2 };
    const [ra, rb] = await Promise.all([
      modernCall(0, alice, key, 'slow_compute', args),
      modernCall(1, bob, key, 'slow_compute', args),
    ]);
    expect(ra.json.result.taskId).not.toBe(rb.json.result.taskId);
    // Other arguments under bob's key are no conflict for alice's.
    const bobOther = await modernCall(0, bob, newKey(), 'slow_compute', { seconds: 1 });
    expect(bobOther.json.result.resultType).toBe('task');
    expect((await ownerTasks(alice)).map((t) => t.id)).toEqual([ra.json.result.taskId]);
    expect((await ownerTasks(bob)).map((t) => t.id)).toContain(rb.json.result.taskId);
  });

  it('a modern keyed call that finishes inside the window answers inline, recorded as a task', async () => {
    const user = freshUser('idem-inline');
    const key = newKey();
    const first = await modernCall(0, user, key, 'slow_compute', { seconds: 0, label: 'quick' });
    expect(first.json.result).toMatchObject({ resultType: 'complete' });
    expect(first.json.result.content[0].text).toBe('Computed quick after 0 s');
    const rows = await ownerTasks(user);
    expect(rows).toEqual([{ id: expect.any(String), status: 'completed', idempotency_key: key }]);
    const again = await modernCall(1, user, key, 'slow_compute', { label: 'quick', seconds: 0 });
    expect(again.json.result.content[0].text).toBe('Computed quick after 0 s');

    // A failure inside the window: answered as the error, and a repeat replays that error.
    const failKey = newKey();
    const failed = await modernCall(1, user, failKey, 'protocol_error_job', {});
    expect(failed.json.error).toEqual({ code: -32603, message: 'protocol_error_job failed on purpose' });
    const replay = await modernCall(0, user, failKey, 'protocol_error_job', {});
    expect(replay.json.error).toEqual(failed.json.error);
    expect(await ownerTasks(user)).toHaveLength(2);

    // A required tool always answers with its task, a repeat of a finished one too (read it with tasks/get).
    const jobKey = newKey();
    const job = await modernCall(0, user, jobKey, 'failing_job', {});
    expect(job.json.result).toMatchObject({ resultType: 'task' });
    await waitFor(
      () => ownerTasks(user),
      // Its tool error result (isError) completes a 2026-07-28 task.
      (rows) => rows.some((r) => r.idempotency_key === jobKey && r.status === 'completed'),
      { what: 'failing_job to finish' },
    );
    const jobAgain = await modernCall(1, user, jobKey, 'failing_job', {});
    expect(jobAgain.json.result).toMatchObject({
      resultType: 'task',
      taskId: job.json.result.taskId,
      status: 'completed',
    });
  }, 20_000);

  it('a question inside a keyed window parks the task; repeats find it; once answered a repeat gets the result', async () => {
    const user = freshUser('idem-input');
    const key = newKey();
    const ask = (i: number) =>
      modern(
        mcp(i),
        'tools/call',
        { name: 'confirm_delete', arguments: { filename: 'a.txt' } },
        { caps: { elicitation: {} }, headers: keyed(user, key) },
      );
    const first = await ask(0);
    expect(first.json.result).toMatchObject({ resultType: 'task', status: 'input_required' });
    const taskId = first.json.result.taskId as string;
    const repeat = await ask(1);
    expect(repeat.json.result).toMatchObject({ resultType: 'task', taskId, status: 'input_required' });
    const parked = await modern(mcp(1), 'tasks/get', { taskId }, { headers: asUser(user) });
    const [inputKey] = Object.keys(parked.json.result.inputRequests as Record<string, unknown>);
    expect(inputKey).toMatch(/^r\d+\.confirm_delete$/);
    const update = await modern(
      mcp(0),
      'tasks/update',
      { taskId, inputResponses: { [inputKey]: { action: 'accept', content: { confirm: true } } } },
      { headers: asUser(user) },
    );
    expect(update.json.result).toMatchObject({ resultType: 'complete' });
    await waitFor(
      () => ownerTasks(user),
      (rows) => rows[0]?.status === 'completed',
      { what: 'the answered task to complete' },
    );
    expect((await ask(1)).json.result.content[0].text).toBe('Deleted a.txt');
    expect(await ownerTasks(user)).toHaveLength(1);
  });

  it('through a web instance (no task work there): the keyed task is queued, run elsewhere, found again', async () => {
    const web = await startServer({
      DATABASE_URL: db.url,
      MCP_CONFORMANCE_FIXTURES: 'true',
      MRTR_STATE_SECRET: STATE_SECRET,
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      TASK_INLINE_WINDOW_MS: String(INLINE_WINDOW_MS),
      INSTANCE_ROLE: 'web',
    });
    try {
      const user = freshUser('idem-web');
      const key = newKey();
      const claimsBefore = await counterSum(urls, 'mcp_task_claims_total', {});
      const call = () =>
        modern(
          `${web.baseUrl}/mcp`,
          'tools/call',
          { name: 'slow_compute', arguments: { seconds: 0, label: 'queued' } },
          { headers: keyed(user, key) },
        );
      // A worker (a or b) claims it at once and ends it inside the window: answered inline from the task.
      const first = await call();
      expect(first.json.result.content[0].text).toBe('Computed queued after 0 s');
      const [row] = await ownerTasks(user);
      expect(row).toMatchObject({ status: 'completed', idempotency_key: key });
      const again = await Promise.all([
        call(),
        modernCall(0, user, key, 'slow_compute', { seconds: 0, label: 'queued' }),
      ]);
      for (const r of again) expect(r.json.result.content[0].text).toBe('Computed queued after 0 s');
      expect(await ownerTasks(user)).toHaveLength(1);
      // The web instance runs no task work: one of the workers claimed it, once.
      expect((await counterSum(urls, 'mcp_task_claims_total', {})) - claimsBefore).toBe(1);
    } finally {
      await stopServer(web);
    }
  }, 40_000);

  it('a malformed key is -32602 naming the header; calls that create no task ignore a key', async () => {
    const user = freshUser('idem-bad');
    for (const bad of ['has space', 'x'.repeat(256), 'caf\u00e9']) {
      const r = await modern(
        mcp(0),
        'tools/call',
        { name: 'slow_compute', arguments: { seconds: 0 } },
        { headers: { ...asUser(user), 'idempotency-key': bad } },
      ).catch((err: unknown) => ({ status: 0, json: { error: { message: String(err) } } }) as RpcAnswer);
      // fetch refuses a non-ASCII header value itself; the server sees only the other two.
      if (r.status === 0) continue;
      expect(r.status).toBe(400);
      expect(responseOf(r).error).toMatchObject({
        code: -32602,
        message: expect.stringContaining('Idempotency-Key header'),
      });
    }
    // greet is taskSupport forbidden: inline, and the key is not recorded anywhere.
    const greet = await modernCall(0, user, newKey(), 'greet', { name: 'Ada' });
    expect(greet.json.result.content[0].text).toBe('Hello, Ada!');
    // Without the tasks extension an optional tool runs inline: no task, the key ignored.
    const plain = await modern(
      mcp(1),
      'tools/call',
      { name: 'slow_compute', arguments: { seconds: 0 } },
      { ext: false, headers: keyed(user, newKey()) },
    );
    expect(plain.json.result.content[0].text).toBe('Computed result after 0 s');
    expect(await ownerTasks(user)).toEqual([]);
  });
});
