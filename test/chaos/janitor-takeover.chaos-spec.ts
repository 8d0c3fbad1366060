import type { ServerProcess } from '../support/server-process.js';
import { LegacyClient, waitFor } from '../support/tasks-e2e.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';
import { chaosEnv, figure, pollUntil, startInstances, stopAll, tail } from './support/chaos-kit.js';

const SCENARIO = 'janitor takeover';
const INTERVAL_MS = 2000;
/** Time a sweep itself may take on a loaded 2-core machine, on top of the interval. */
const SWEEP_ALLOWANCE_MS = 1000;

async function janitorRuns(baseUrl: string): Promise<{ ok: number; lastSuccess: number }> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const ok = /^mcp_janitor_runs_total\{result="ok"\} (\S+)$/m.exec(text);
  const last = /^mcp_janitor_last_success_timestamp_seconds (\S+)$/m.exec(text);
  return { ok: ok ? Number(ok[1]) : 0, lastSuccess: last ? Number(last[1]) * 1000 : 0 };
}

/**
 * Every instance schedules the janitor; one at a time sweeps (an advisory lock per batch). The instance that
 * has been sweeping is killed with SIGKILL; the other must sweep within one interval, and a task whose ttl
 * ends after the kill must be expired by the survivor no later than one interval past its end.
 * Leases and heartbeats are long here so that only the janitor's expiry step can end the task.
 */
describe('chaos: the instance running the janitor dies', () => {
  let db: TestDatabase;
  let servers: ServerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('chaos_janitor');
    servers = await startInstances(
      2,
      chaosEnv(db.url, {
        JANITOR_INTERVAL_MS: String(INTERVAL_MS),
        TASK_LEASE_MS: '60000',
        INSTANCE_HEARTBEAT_MS: '20000',
      }),
    );
  });
  afterAll(async () => {
    await stopAll(servers, 'janitor-takeover');
    await db.drop();
  });

  it('the surviving instance sweeps within one interval and expires the dead one’s task on time', async () => {
    const [sweeper, survivor] = servers;
    // The victim must have been sweeping: wait for a successful run on it.
    const before = await pollUntil(
      () => janitorRuns(sweeper.baseUrl),
      (r) => r.ok > 0,
      4 * INTERVAL_MS,
    );
    expect(before.ok).toBeGreaterThan(0);

    const client = await LegacyClient.open(`${sweeper.baseUrl}/mcp`);
    const task = await client.createTask('slow_compute', { seconds: 120 }, { ttl: 3 * INTERVAL_MS });

    const killedAt = Date.now();
    sweeper.proc.kill('SIGKILL');
    await sweeper.exited;

    // The survivor's next successful sweep after the kill.
    const after = await pollUntil(
      () => janitorRuns(survivor.baseUrl),
      (r) => r.lastSuccess > killedAt,
      4 * INTERVAL_MS,
    );
    const takeoverMs = after.lastSuccess - killedAt;

    // The task is expired by the survivor's janitor: nobody reads it, so no reader can expire it on the spot.
    const row = await waitFor(
      () =>
        withClient(db.url, async (c) => {
          const r = await c.query(
            `SELECT status, status_message,
                    (extract(epoch FROM last_updated_at - expires_at) * 1000)::int AS late_ms
               FROM task WHERE id = $1`,
            [task.taskId],
          );
          return r.rows[0] as { status: string; status_message: string; late_ms: number };
        }),
      (r) => r.status !== 'working',
      { timeoutMs: 6 * INTERVAL_MS + 3 * INTERVAL_MS, intervalMs: 200, what: 'the expiry sweep' },
    );

    figure(SCENARIO, 'janitor interval', INTERVAL_MS, 'ms');
    figure(SCENARIO, 'first sweep by the survivor after the kill', takeoverMs, 'ms');
    figure(SCENARIO, 'expiry swept after the ttl ended by', row.late_ms, 'ms');

    if (row.status !== 'failed') throw new Error(`unexpected ${row.status}; log:\n${tail(survivor)}`);
    expect(row.status_message).toMatch(/expired/i);
    expect(takeoverMs).toBeLessThanOrEqual(INTERVAL_MS + SWEEP_ALLOWANCE_MS);
    expect(row.late_ms).toBeLessThanOrEqual(INTERVAL_MS + SWEEP_ALLOWANCE_MS);
  });
});
