import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { McpTool, type ToolContext } from '../../src/tool-dispatch/index.js';
import { responseOf, type RpcAnswer } from '../support/mcp-http.js';
import { asUser, freshUser, LegacyClient, modern, PROXY_SECRET, waitFor } from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

/** Tools of this suite only: a backoff long enough to cancel inside, and a checkpoint saved inline. */
@Injectable()
class RetryProbeTools {
  @McpTool({
    name: 'slow_retry',
    description: 'Always fails; retried after a minute.',
    taskSupport: 'optional',
    durability: { retry: { maxAttempts: 3, initialDelayMs: 60000 } },
  })
  slowRetry(): never {
    throw new Error('slow_retry failed on purpose');
  }

  @McpTool({
    name: 'inline_checkpoint',
    description: 'Checkpoints at once, then works past the inline window.',
    taskSupport: 'optional',
    durability: { resumable: true },
  })
  async inlineCheckpoint(_args: unknown, ctx: ToolContext): Promise<string> {
    await ctx.checkpoint({ phase: 'inline', attempt: ctx.attempt });
    await sleep(1500, undefined, { signal: ctx.signal });
    return 'done';
  }

  @McpTool({
    name: 'resume_after_failure',
    description: 'Checkpoints, fails its first attempt, and reports what the retry started from.',
    taskSupport: 'optional',
    durability: { retry: { maxAttempts: 2, initialDelayMs: 50 } },
  })
  async resumeAfterFailure(_args: unknown, ctx: ToolContext): Promise<string> {
    if (ctx.attempt === 1) {
      await ctx.checkpoint({ done: ['a', 'b'] });
      await sleep(150, undefined, { signal: ctx.signal });
      throw new Error('first attempt lost its upstream');
    }
    return `attempt ${ctx.attempt} resumed from ${JSON.stringify(ctx.lastCheckpoint)}`;
  }
}
@Module({ providers: [RetryProbeTools] })
class RetryProbeModule {}

/** The task row's durable columns, as the registry keeps them. */
interface DurableRow {
  attempt: number;
  failed_attempts: number;
  max_attempts: number;
  resumable: boolean;
  checkpoint: unknown;
  last_error: { code: number; message: string } | null;
  instance_id: string | null;
  /** available_at − last_updated_at (ms, database clock): the backoff the re-queue granted. */
  wait_ms: number | null;
}

/**
 * Declared durability over real HTTP (issue 22): a handler error the tool's retry policy retries re-queues
 * the task after its backoff (visible in tasks/get), inline errors of a modern call become such a task, a
 * cancel inside the backoff is immediate, checkpoints saved inline land on the task, and a tool's declared
 * longest run sets the ttl a client gets without asking.
 */
describe('retries, checkpoints and ttl of durable tools (real HTTP)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;

  const row = (taskId: string): Promise<DurableRow> =>
    withClient(db.url, async (c) => {
      const r = await c.query<DurableRow>(
        `SELECT attempt, failed_attempts, max_attempts, resumable, checkpoint, last_error, instance_id,
                (extract(epoch FROM available_at - last_updated_at) * 1000)::float8 AS wait_ms
           FROM task WHERE id = $1`,
        [taskId],
      );
      return r.rows[0];
    });

  function caller(user = freshUser()) {
    const headers = asUser(user);
    const send = (method: string, params: Record<string, unknown> = {}): Promise<RpcAnswer> =>
      modern(url, method, params, { headers });
    const ok = async (method: string, params: Record<string, unknown> = {}): Promise<any> => {
      const answer = await send(method, params);
      const response = responseOf(answer);
      if (!response || !('result' in response))
        throw new Error(`${method} failed: ${answer.status} ${answer.text}`);
      return response.result;
    };
    return { user, headers, send, ok, get: (taskId: string) => ok('tasks/get', { taskId }) };
  }

  beforeAll(async () => {
    db = await createTestDatabase('durable_retry');
    app = await createTestApp(
      db.url,
      {
        MCP_CONFORMANCE_FIXTURES: 'true',
        AUTH_PROVIDERS: 'proxy',
        AUTH_PROXY_SECRET: PROXY_SECRET,
        TASK_INLINE_WINDOW_MS: '100',
      },
      [RetryProbeModule],
    );
    url = await loopbackUrl(app, '/mcp');
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('answers a modern call whose first attempt fails with a task queued for the retry, saying when it runs', async () => {
    const c = caller();
    const created = await c.ok('tools/call', { name: 'flaky_job', arguments: { failTimes: 2 } });
    expect(created).toMatchObject({ resultType: 'task', status: 'working' });
    const m = /^Attempt 1 failed: (.+); retry 1 of 4 \(attempt 2\) runs at (\S+) \(in 200 ms\)$/.exec(
      created.statusMessage as string,
    );
    expect(m).not.toBeNull();
    expect(m![1]).toBe('flaky_job attempt 1 failed on purpose (2 set to fail)');
    // The ISO time is the failure time plus the backoff, on the server's clock.
    const at = Date.parse(m![2]);
    expect(Math.abs(at - Date.parse(created.lastUpdatedAt as string) - 200)).toBeLessThan(1000);
    const r = await row(created.taskId);
    expect(r).toMatchObject({
      max_attempts: 5,
      resumable: false,
      last_error: { code: -32603, message: 'flaky_job attempt 1 failed on purpose (2 set to fail)' },
    });
    // Re-queued after the first failure (a claimer may already have picked it up again since).
    expect(r.attempt).toBeGreaterThanOrEqual(2);
    expect(r.failed_attempts).toBeGreaterThanOrEqual(1);
    const metrics = await (await fetch(await loopbackUrl(app, '/metrics'))).text();
    expect(metrics).toMatch(/^mcp_task_retries_total\{tool="flaky_job",outcome="scheduled"\} [1-9]/m);
    expect(metrics).toMatch(/^mcp_task_retries_total\{tool="flaky_job",outcome="exhausted"\} 0$/m);
  });

  it('re-queues a legacy task whose run fails with the backoff its policy grants', async () => {
    const client = await LegacyClient.open(url, {}, asUser(freshUser()));
    const task = await client.createTask('flaky_job', { failTimes: 2 });
    const r = await waitFor(
      () => row(task.taskId),
      (x) => x.failed_attempts >= 1,
      { what: 'the first failure re-queued' },
    );
    expect(r.last_error?.message).toBe('flaky_job attempt 1 failed on purpose (2 set to fail)');
    // The first backoff of flaky_job's policy (200 ms, factor 2), by the database clock.
    expect(r.wait_ms).toBeGreaterThanOrEqual(150);
    expect(r.wait_ms).toBeLessThanOrEqual(250);
    const got = await client.result('tasks/get', { taskId: task.taskId });
    expect(got.status).toBe('working');
  });

  it('completes flaky_job (failTimes 2) on attempt 3 after backoffs within ±25 % of the policy', async () => {
    const c = caller();
    const created = await c.ok('tools/call', { name: 'flaky_job', arguments: { failTimes: 2 } });
    expect(created).toMatchObject({ resultType: 'task', status: 'working' });
    // Each failure re-queues the task (last_updated_at = the failure, by the database clock): sampled until
    // it completes, keyed by the attempt it waits for, so the sampling rate cannot skew the figures.
    const failures = new Map<number, { failedAt: number; waitMs: number }>();
    const sample = () =>
      withClient(db.url, async (cl) => {
        const r = await cl.query<{ attempt: number; status: string; at: number; wait_ms: number | null }>(
          `SELECT attempt, status, (extract(epoch FROM last_updated_at) * 1000)::float8 AS at,
                  (extract(epoch FROM available_at - last_updated_at) * 1000)::float8 AS wait_ms
             FROM task WHERE id = $1`,
          [created.taskId],
        );
        const x = r.rows[0];
        if (x.wait_ms !== null && !failures.has(x.attempt)) {
          failures.set(x.attempt, { failedAt: x.at, waitMs: x.wait_ms });
        }
        return x;
      });
    await waitFor(sample, (x) => x.status !== 'working', { what: 'flaky_job completed', intervalMs: 20 });
    const done = await c.get(created.taskId);
    expect(done.status).toBe('completed');
    expect(done.result.structuredContent).toEqual({ attempts: 3 });
    // The waits the re-queues granted: 200 ms, then 400 ms (factor 2).
    const granted = [2, 3].map((attempt) => failures.get(attempt)?.waitMs);
    expect(granted[0]).toBeGreaterThanOrEqual(150);
    expect(granted[0]).toBeLessThanOrEqual(250);
    expect(granted[1]).toBeGreaterThanOrEqual(300);
    expect(granted[1]).toBeLessThanOrEqual(500);
    // The wait that really passed between the first and the second failure: the backoff, then a claim
    // and a run that fails at once (a margin for a loaded machine on top of the +25 %).
    const second = failures.get(3);
    const first = failures.get(2);
    expect(first && second).toBeTruthy();
    const waited = second!.failedAt - first!.failedAt;
    expect(waited).toBeGreaterThanOrEqual(150);
    expect(waited).toBeLessThanOrEqual(250 + 250);
  });

  it('fails flaky_job (failTimes 9) after its 5 attempts, naming them and the last error', async () => {
    const client = await LegacyClient.open(url, {}, asUser(freshUser()));
    const task = await client.createTask('flaky_job', { failTimes: 9 });
    // Backoffs 200 + 400 + 800 + 1000 ms (capped) between the five runs.
    const ended = await waitFor(
      () => client.result('tasks/get', { taskId: task.taskId }),
      (t) => t.status !== 'working',
      { what: 'flaky_job failed', timeoutMs: 20000 },
    );
    expect(ended.status).toBe('failed');
    const result = await client.call('tasks/result', { taskId: task.taskId });
    expect(result.error).toMatchObject({
      code: -32603,
      message: 'Failed after 5 attempts: flaky_job attempt 5 failed on purpose (9 set to fail)',
    });
    expect(await row(task.taskId)).toMatchObject({ attempt: 5, failed_attempts: 4, max_attempts: 5 });
    const metrics = await (await fetch(await loopbackUrl(app, '/metrics'))).text();
    expect(metrics).toMatch(/^mcp_task_retries_total\{tool="flaky_job",outcome="exhausted"\} [1-9]/m);
  });

  it('runs the retry from the checkpoint the failed attempt saved, with its attempt number', async () => {
    const c = caller();
    // The first attempt checkpoints inside the inline window, then fails after it (as a task).
    const created = await c.ok('tools/call', { name: 'resume_after_failure', arguments: {} });
    expect(created.resultType).toBe('task');
    const done = await waitFor(
      () => c.get(created.taskId),
      (t) => t.status !== 'working',
      { what: 'resume_after_failure completed' },
    );
    expect(done.status).toBe('completed');
    expect(done.result.content).toEqual([
      { type: 'text', text: 'attempt 2 resumed from {"done":["a","b"]}' },
    ]);
  });

  it('cancels at once a task waiting out its backoff', async () => {
    const c = caller();
    const created = await c.ok('tools/call', { name: 'slow_retry', arguments: {} });
    expect(created.status).toBe('working');
    expect(created.statusMessage).toMatch(/\(attempt 2\) runs at \S+ \(in 60 s\)$/);
    expect((await row(created.taskId)).instance_id).toBeNull();
    const started = performance.now();
    const cancelled = await c.ok('tasks/cancel', { taskId: created.taskId });
    expect(performance.now() - started).toBeLessThan(2000);
    expect(cancelled.status ?? (await c.get(created.taskId)).status).toBe('cancelled');
    expect((await c.get(created.taskId)).status).toBe('cancelled');
  });

  it('writes the checkpoint a modern call saved inline on the task it becomes', async () => {
    const c = caller();
    const created = await c.ok('tools/call', { name: 'inline_checkpoint', arguments: {} });
    expect(created.resultType).toBe('task');
    const r = await waitFor(
      () => row(created.taskId),
      (x) => x.checkpoint !== null,
      { what: 'the inline checkpoint written', timeoutMs: 1000, intervalMs: 20 },
    );
    expect(r).toMatchObject({
      checkpoint: { phase: 'inline', attempt: 1 },
      resumable: true,
      max_attempts: 3,
    });
    const done = await waitFor(
      () => c.get(created.taskId),
      (t) => t.status !== 'working',
      { what: 'inline_checkpoint completed' },
    );
    expect(done.status).toBe('completed');
  });

  it('grants a ttl covering the declared longest run when the client asks for none', async () => {
    // durable_steps declares maxRunMs 60,000,000 (1000 steps of a minute): + TASK_DEFAULT_TTL_MS (1 h).
    const client = await LegacyClient.open(url, {}, asUser(freshUser()));
    const plain = await client.createTask('durable_steps', { steps: 1, stepMs: 0 });
    expect(plain.ttl).toBe(60_000_000 + 3_600_000);
    const asked = await client.createTask('durable_steps', { steps: 1, stepMs: 0 }, { ttl: 5000 });
    expect(asked.ttl).toBe(5000);
    const created = await caller().ok('tools/call', {
      name: 'durable_steps',
      arguments: { steps: 3, stepMs: 80 },
    });
    expect(created).toMatchObject({ resultType: 'task', ttlMs: 63_600_000 });
    // The tool without a declaration keeps the default.
    const slow = await client.createTask('slow_compute', { seconds: 0 });
    expect(slow.ttl).toBe(3_600_000);
  });

  it('finishes durable_steps from its checkpoints, reporting the run and where it started', async () => {
    const c = caller();
    const created = await c.ok('tools/call', { name: 'durable_steps', arguments: { steps: 4, stepMs: 60 } });
    expect(created.resultType).toBe('task');
    const done = await waitFor(
      () => c.get(created.taskId),
      (t) => t.status !== 'working',
      { what: 'durable_steps completed' },
    );
    expect(done.status).toBe('completed');
    expect(done.result.structuredContent).toEqual({ completedSteps: 4, attempts: 1, resumedFromStep: 0 });
    expect(done.result.content).toEqual([
      { type: 'text', text: 'Completed 4 steps on attempt 1 (resumed from step 0)' },
    ]);
    expect((await row(created.taskId)).checkpoint).toEqual({ completedSteps: 4 });
  });
});
