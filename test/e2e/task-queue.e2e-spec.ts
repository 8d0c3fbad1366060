import { responseOf } from '../support/mcp-http.js';
import { startServer, stopServer, type ServerProcess } from '../support/server-process.js';
import { LegacyClient, modern, waitFor } from '../support/tasks-e2e.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

const QUEUED = 'Queued: waiting for a worker with free capacity';

/** A gauge or counter of a spawned server's /metrics (the sum over the series matching `labels`). */
async function scrape(server: ServerProcess, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`${server.baseUrl}/metrics`)).text();
  const re = new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`, 'gm');
  let sum = 0;
  for (const m of text.matchAll(re)) if ((m[1] ?? '').includes(labels)) sum += Number(m[2]);
  return sum;
}

interface Handle {
  taskId: string;
  read(): Promise<{ status: string; statusMessage?: string | null }>;
}

/**
 * The queue every instance claims from, with the built server spawned as real processes on one database
 * (issue 22): TASK_WORKER_CONCURRENCY bounds the runs of an instance whatever the era, a web instance only
 * queues, and a worker that joins runs what waited.
 */
describe('task queue and instance roles (spawned servers, one database)', () => {
  let db: TestDatabase;
  const servers: ServerProcess[] = [];
  const base = (): Record<string, string> => ({
    DATABASE_URL: db.url,
    MCP_CONFORMANCE_FIXTURES: 'true',
    INSTANCE_HEARTBEAT_MS: '1000',
  });
  const start = async (env: Record<string, string>): Promise<ServerProcess> => {
    const s = await startServer({ ...base(), ...env });
    servers.push(s);
    return s;
  };

  beforeEach(async () => {
    db = await createTestDatabase('task_queue_e2e');
  });
  afterEach(async () => {
    for (const s of servers.splice(0)) await stopServer(s, 'SIGKILL');
    await db.drop();
  });

  /** Three legacy task handles and three modern calls of slow_compute, all at once. */
  const createSix = async (url: string, seconds: number): Promise<Handle[]> => {
    const legacy = await LegacyClient.open(url);
    const legacyOne = async (i: number): Promise<Handle> => {
      const t = await legacy.createTask('slow_compute', { seconds, label: `l${i}` });
      return { taskId: t.taskId, read: () => legacy.result('tasks/get', { taskId: t.taskId }) };
    };
    const modernOne = async (i: number): Promise<Handle> => {
      const r = responseOf(
        await modern(url, 'tools/call', { name: 'slow_compute', arguments: { seconds, label: `m${i}` } }),
      ).result;
      expect(r.resultType).toBe('task');
      return {
        taskId: r.taskId,
        read: async () => responseOf(await modern(url, 'tasks/get', { taskId: r.taskId })).result,
      };
    };
    return Promise.all([0, 1, 2].flatMap((i) => [legacyOne(i), modernOne(i)]));
  };

  it('TASK_WORKER_CONCURRENCY=2: six one-second tasks never run more than two at once, and all complete', async () => {
    const server = await start({ TASK_WORKER_CONCURRENCY: '2' });
    const url = `${server.baseUrl}/mcp`;
    const started = Date.now();
    const tasks = await createSix(url, 1);
    let maxBusy = 0;
    let maxRunning = 0;
    let sawQueued = false;
    const statuses = new Map<string, string>();
    while (Date.now() - started < 30000) {
      const [busy, reads] = await Promise.all([
        scrape(server, 'mcp_task_worker_slots', 'state="busy"'),
        Promise.all(tasks.map((t) => t.read())),
      ]);
      maxBusy = Math.max(maxBusy, busy);
      const running = reads.filter((r) => r.status === 'working' && r.statusMessage !== QUEUED).length;
      maxRunning = Math.max(maxRunning, running);
      if (reads.some((r) => r.status === 'working' && r.statusMessage === QUEUED)) sawQueued = true;
      reads.forEach((r, i) => statuses.set(tasks[i].taskId, r.status));
      if (reads.every((r) => r.status !== 'working')) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect([...statuses.values()]).toEqual(Array(6).fill('completed'));
    expect(maxBusy).toBe(2);
    expect(maxRunning).toBeLessThanOrEqual(2);
    expect(sawQueued).toBe(true);
    // Six one-second runs two at a time take three rounds (plus the claims): bounded, not serialised.
    expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
    expect(await scrape(server, 'mcp_task_runs_started_total', 'tool="slow_compute"')).toBeGreaterThanOrEqual(
      6,
    );
  }, 60000);

  it('only web instances: tasks wait queued and none fail; a worker joins and runs them; its /mcp is 503', async () => {
    const web = await start({ INSTANCE_ROLE: 'web', TASK_INLINE_WINDOW_MS: '1500' });
    const url = `${web.baseUrl}/mcp`;
    const tasks = await createSix(url, 0.2);
    await new Promise((r) => setTimeout(r, 2000));
    for (const t of tasks) expect(await t.read()).toMatchObject({ status: 'working', statusMessage: QUEUED });
    expect(await scrape(web, 'mcp_task_queue_depth', 'state="ready"')).toBe(6);
    expect(await scrape(web, 'mcp_task_worker_slots')).toBe(0);

    const worker = await start({ INSTANCE_ROLE: 'worker' });
    for (const t of tasks) {
      const done = await waitFor(
        () => t.read(),
        (r) => r.status !== 'working',
        { timeoutMs: 20000, what: `task ${t.taskId} to end` },
      );
      expect(done.status).toBe('completed');
    }
    expect(await scrape(worker, 'mcp_task_claims_total')).toBe(6);
    expect(await scrape(web, 'mcp_task_queue_depth')).toBe(0);
    // With a worker up, a short modern call through the web instance ends inside the window: answered inline.
    const inline = responseOf(
      await modern(url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0, label: 'quick' } }),
    ).result;
    expect(inline.resultType).not.toBe('task');
    expect(inline.content).toEqual([{ type: 'text', text: 'Computed quick after 0 s' }]);

    // The worker serves health and metrics, never MCP (any method).
    for (const method of ['POST', 'GET', 'DELETE']) {
      const res = await fetch(`${worker.baseUrl}/mcp`, {
        method,
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: method === 'POST' ? JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) : undefined,
      });
      expect(res.status).toBe(503);
      const body = (await res.json()) as { error: { code: number; message: string } };
      expect(body.error.code).toBe(-32000);
      expect(body.error.message).toContain('INSTANCE_ROLE=worker');
    }
    const ready = await fetch(`${worker.baseUrl}/health/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ok', role: 'worker' });
    // Each instance's row says its role, for `instances list` and the console.
    const roles = await withClient(db.url, (c) =>
      c.query<{ role: string }>('SELECT role FROM service_instance ORDER BY started_at'),
    );
    expect(roles.rows.map((r) => r.role)).toEqual(['web', 'worker']);
  }, 90000);
});
