import type { INestApplication } from '@nestjs/common';
import { loopbackUrl, createTestApp } from '../support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';
import { LEGACY, responseOf, rpc, type RpcAnswer } from '../support/mcp-http.js';
import { LegacyClient, modern, waitFor } from '../support/tasks-e2e.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The database answers but refuses every write (SQLSTATE 25006), as a hot standby does when an address still
 * leads to it after a failover. Reproduced without a standby: `default_transaction_read_only` on the test
 * database, and the server's connections cut so the pool reconnects into read-only sessions. (The chaos suite
 * test/chaos/readonly-failover.chaos-spec.ts does it with a real primary and streaming standby.)
 */
describe('a read-only database (real PostgreSQL, default_transaction_read_only)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let base: string;
  let url: string;

  async function setReadOnly(on: boolean): Promise<void> {
    await withClient(db.url, async (c) => {
      await c.query('SET default_transaction_read_only = off');
      await c.query(
        on
          ? `ALTER DATABASE "${db.name}" SET default_transaction_read_only = on`
          : `ALTER DATABASE "${db.name}" RESET default_transaction_read_only`,
      );
      // Only new sessions take the setting: the server's pooled connections are cut so it reconnects. Going
      // back, they stay, as a pool's connections to a standby stay there when the address moves back.
      if (on) {
        await c.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
          [db.name],
        );
      }
    });
  }

  async function ready(): Promise<{ status: number; body: any }> {
    const res = await fetch(`${base}/health/ready`);
    return { status: res.status, body: await res.json() };
  }

  /** A read-only period never gets a final error: a success, or 503 with Retry-After. */
  function retryableOrServed(a: RpcAnswer, what: string): 'served' | 'retry' {
    if (a.status === 503) {
      expect(a.headers.get('retry-after')).toMatch(/^\d+$/);
      return 'retry';
    }
    const response = responseOf(a);
    if (a.status !== 200 || !response || 'error' in response) {
      throw new Error(`${what}: final answer ${a.status} ${a.text}`);
    }
    return 'served';
  }

  beforeAll(async () => {
    db = await createTestDatabase('readonly');
    app = await createTestApp(db.url, {
      MCP_CONFORMANCE_FIXTURES: 'true',
      HEALTH_DB_TIMEOUT_MS: '1000',
      DB_POOL_MAX: '6',
    });
    base = await loopbackUrl(app);
    url = `${base}/mcp`;
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('answers writes 503 with Retry-After, serves reads, reports not ready, and recovers once writable', async () => {
    const legacy = await LegacyClient.open(url);
    const legacyTask = await legacy.createTask('slow_compute', { seconds: 0 });
    const modernRunning = responseOf(
      await modern(url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 60 } }),
    ).result;
    expect(modernRunning.resultType).toBe('task');
    const legacyRunning = await legacy.createTask('slow_compute', { seconds: 60 });
    await waitFor(
      async () => (await legacy.result('tasks/get', { taskId: legacyTask.taskId })).status as string,
      (s) => s === 'completed',
      { what: 'the first task to complete' },
    );

    await setReadOnly(true);
    try {
      const down = await waitFor(
        ready,
        (r) => r.status === 503 && r.body.checks.database?.reason === 'read-only',
        {
          timeoutMs: 20000,
          what: 'readiness to report the read-only database',
        },
      );
      expect(down.body.checks.database).toEqual({ status: 'down', reason: 'read-only' });
      // Past the session's touch interval: resolving it wants to write its row again.
      await sleep(5200);

      // Reads are served: resolving the legacy session must not need its touch.
      const got = await legacy.send('tasks/get', { taskId: legacyTask.taskId });
      expect(got.status).toBe(200);
      expect(responseOf(got).result.status).toBe('completed');
      const modernGot = await modern(url, 'tasks/get', { taskId: modernRunning.taskId });
      expect(modernGot.status).toBe(200);
      expect(responseOf(modernGot).result.status).toBe('working');

      // Writes: 503 with Retry-After, never a final internal error.
      const writes: [string, Promise<RpcAnswer>][] = [
        [
          'legacy tools/call task',
          legacy.send('tools/call', { name: 'slow_compute', arguments: { seconds: 0 }, task: {} }),
        ],
        ['legacy tasks/cancel', legacy.send('tasks/cancel', { taskId: legacyRunning.taskId })],
        ['legacy initialize', initialize()],
        [
          'modern tools/call',
          modern(url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 60 } }),
        ],
        ['modern tasks/cancel', modern(url, 'tasks/cancel', { taskId: modernRunning.taskId })],
      ];
      for (const [what, answer] of writes) {
        const a = await answer;
        expect({ what, status: a.status }).toEqual({ what, status: 503 });
        expect(a.headers.get('retry-after')).toMatch(/^\d+$/);
        expect(a.text).not.toMatch(/Internal error \(correlation id/);
      }
      const faults = await ready();
      expect(faults.status).toBe(503);
      expect(faults.body.checks.database_faults).toEqual({ status: 'down', reason: 'retryable faults' });
    } finally {
      await setReadOnly(false);
    }

    // Writable again, with no connection cut: the pool drops the read-only connections and reconnects.
    await waitFor(ready, (r) => r.status === 200, { timeoutMs: 20000, what: 'readiness back to 200' });
    const created = await waitFor(
      async () => legacy.send('tools/call', { name: 'slow_compute', arguments: { seconds: 0 }, task: {} }),
      (a) => retryableOrServed(a, 'legacy tools/call after') === 'served',
      { timeoutMs: 10000, intervalMs: 200, what: 'a legacy task to be created' },
    );
    const task = responseOf(created).result.task as { taskId: string };
    await waitFor(
      async () => (await legacy.result('tasks/get', { taskId: task.taskId })).status as string,
      (s) => s === 'completed',
      { what: 'the new task to complete' },
    );
    for (let i = 0; i < 20; i++) {
      const a = await modern(url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0 } });
      expect(a.status).toBe(200);
      expect(responseOf(a).result.resultType).toBe('complete');
      const l = await legacy.send('tools/call', {
        name: 'slow_compute',
        arguments: { seconds: 0 },
        task: {},
      });
      expect(l.status).toBe(200);
      expect(responseOf(l).result.task.status).toBe('working');
    }
    // The tasks the read-only period could not cancel are cancelled now.
    expect((await legacy.send('tasks/cancel', { taskId: legacyRunning.taskId })).status).toBe(200);
    expect((await modern(url, 'tasks/cancel', { taskId: modernRunning.taskId })).status).toBe(200);
  }, 90000);

  function initialize(): Promise<RpcAnswer> {
    const params = {
      protocolVersion: LEGACY,
      capabilities: {},
      clientInfo: { name: 'e2e', version: '1.0.0' },
    };
    return rpc(url, { jsonrpc: '2.0', id: 0, method: 'initialize', params });
  }
});
