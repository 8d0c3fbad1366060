import type { ServerProcess } from '../support/server-process.js';
import { startServer } from '../support/server-process.js';
import { LegacyClient } from '../support/tasks-e2e.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';
import { chaosEnv, figure, pollUntil, stopAll } from './support/chaos-kit.js';

const SCENARIO = 'kill -9 of an instance holding a tool limit';
const LEASE_MS = 3000;

/**
 * limited_job allows two runs at once across the cluster. The victim runs two (a minute each); a third call
 * made through the survivor waits for the limit. The victim is killed with SIGKILL: its runs keep counting
 * until their leases lapse (the limit holds while the database still says they run), and stop counting
 * then: the waiting call must start no earlier than the later of the two lapses and soon after it, not when
 * some sweep gets round to it.
 */
describe('chaos: kill -9 of an instance holding a tool limit', () => {
  let db: TestDatabase;
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('chaos_limits_crash');
  });
  afterAll(async () => {
    await stopAll(servers, 'limits-crash');
    await db.drop();
  });

  it("a dead instance's runs stop counting when their leases lapse, not before and not much later", async () => {
    const env = chaosEnv(db.url, { TASK_LEASE_MS: String(LEASE_MS) });
    const victim = await startServer(env);
    servers.push(victim);
    const onVictim = await LegacyClient.open(`${victim.baseUrl}/mcp`);
    const long = await Promise.all(
      ['k1', 'k2'].map((key) => onVictim.createTask('limited_job', { ms: 60000, key })),
    );
    // Both run on the victim (the only instance) before the survivor starts.
    const leased = await pollUntil(
      () =>
        withClient(db.url, async (c) => {
          const { rows } = await c.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM task WHERE instance_id IS NOT NULL`,
          );
          return rows[0].n;
        }),
      (n) => n === 2,
      10000,
    );
    expect(leased).toBe(2);
    const survivor = await startServer(env);
    servers.push(survivor);
    const onSurvivor = await LegacyClient.open(`${survivor.baseUrl}/mcp`);
    const waiting = await onSurvivor.createTask('limited_job', { ms: 0, key: 'k3' });
    const held = await pollUntil(
      () => onSurvivor.result('tasks/get', { taskId: waiting.taskId }),
      (t) => /limit of 2 runs/.test(t.statusMessage ?? ''),
      10000,
    );
    expect(held.status).toBe('working');
    victim.proc.kill('SIGKILL');
    await victim.exited;
    const killedAt = Date.now();
    // The victim renews no more: its leases are final now.
    const lapse = await withClient(db.url, async (c) => {
      const { rows } = await c.query<{ at: Date }>(
        `SELECT max(lease_expires_at) AS at FROM task WHERE id = ANY($1::text[])`,
        [long.map((t) => t.taskId)],
      );
      return rows[0].at.getTime();
    });
    const result = await onSurvivor.result('tasks/result', { taskId: waiting.taskId });
    const startedAt = result.structuredContent.startedAt as number;
    figure(SCENARIO, 'lease lapse after the kill', lapse - killedAt, 'ms');
    figure(SCENARIO, 'waiting run started after the lapse', startedAt - lapse, 'ms');
    // Not before: while the leases held, the database said two runs were going (10 ms of clock rounding).
    expect(startedAt).toBeGreaterThanOrEqual(lapse - 10);
    // Not much later: the hold ends at the lapse, and every claimer armed its timer for it.
    expect(startedAt - lapse).toBeLessThan(1500);
  }, 60000);
});
