import { setTimeout as sleep } from 'node:timers/promises';
import { responseOf } from '../support/mcp-http.js';
import { PgProxy } from '../support/pg-proxy.js';
import type { ServerProcess } from '../support/server-process.js';
import { LegacyClient, modern, waitFor } from '../support/tasks-e2e.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import {
  chaosEnv,
  figure,
  SessionFeed,
  startInstances,
  statusesOf,
  stopAll,
  SubscriptionFeed,
  TERMINAL,
  tail,
} from './support/chaos-kit.js';

const SCENARIO = 'pool cut, listener up';
const MODERN_TASKS = 10;
const LOAD_MS = 9000;
const CREATE_EVERY_MS = 250;
/**
 * The cut starts under load and outlasts it: while later changes keep coming, each NOTIFY also re-reads what
 * an earlier failed read missed, which hides the fault; the changes of the last seconds have no later NOTIFY,
 * so only a retry delivers them.
 */
const CUT_AT_MS = 6000;
const OUTAGE_MS = 4000;
const DELIVERY_DEADLINE_MS = 15000;

/**
 * The documented PgBouncer layout: instance A's pool goes through a pooler (here a PgProxy in the test
 * process), its LISTEN connection straight to PostgreSQL (DATABASE_LISTEN_URL). Under steady load on B in both
 * eras, only A's pooled connections are cut and refused for OUTAGE_MS, from late in the load to after its
 * end. A keeps hearing every NOTIFY, but the re-reads they trigger fail, and no LISTEN reconnect (hence no
 * resync) follows. Every change committed
 * meanwhile must still reach A's GET stream and both of A's subscriptions/listen subscribers: 0 lost.
 */
describe('chaos: one instance’s pool cut while its LISTEN connection stays up', () => {
  let db: TestDatabase;
  let proxy: PgProxy;
  let servers: ServerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('chaos_pool_cut');
    proxy = await PgProxy.start(db.url);
    // B first: it applies the migrations. A: pool through the proxy, listener direct.
    const [b] = await startInstances(1, chaosEnv(db.url, { TASK_LEASE_MS: '30000' }));
    const [a] = await startInstances(
      1,
      chaosEnv(proxy.via(db.url), { DATABASE_LISTEN_URL: db.url, TASK_LEASE_MS: '30000' }),
    );
    servers = [a, b];
  });
  afterAll(async () => {
    proxy?.refuse(undefined);
    await stopAll(servers, 'pool-cut');
    await proxy?.close();
    await db?.drop();
  });

  it('delivers every change committed while A’s reads failed, to every stream and subscriber on A', async () => {
    const [a, b] = servers;
    const urlA = `${a.baseUrl}/mcp`;
    const urlB = `${b.baseUrl}/mcp`;

    const client = await LegacyClient.open(urlA);
    const feed = new SessionFeed(client.sessionId, () => urlA);
    await feed.start();
    const modernIds: string[] = [];
    for (let i = 0; i < MODERN_TASKS; i++) {
      const r = responseOf(
        await modern(urlB, 'tools/call', { name: 'slow_compute', arguments: { seconds: 120 } }),
      );
      expect(r.result.resultType).toBe('task');
      modernIds.push(r.result.taskId);
    }
    const subs = [new SubscriptionFeed(modernIds, () => urlA), new SubscriptionFeed(modernIds, () => urlA)];
    for (const sub of subs) {
      await sub.start();
      await waitFor(
        async () => sub.acknowledged,
        (n) => n > 0,
        { what: 'the subscription acknowledgement' },
      );
    }

    // Steady load on B: a short legacy task of A's session every CREATE_EVERY_MS (working, then
    // completed), and the 2026-07-28 tasks cancelled one by one across the whole window.
    const legacyIds: string[] = [];
    const cancelledAt = new Map<string, number>();
    const createdAt = new Map<string, number>();
    let cut = 0;
    let outage: { from: number; to: number } | undefined;
    const start = Date.now();
    const creating = (async () => {
      while (Date.now() - start < LOAD_MS) {
        const t = await client.at(urlB).createTask('slow_compute', { seconds: 0.5 });
        legacyIds.push(t.taskId);
        createdAt.set(t.taskId, Date.now());
        await sleep(CREATE_EVERY_MS);
      }
    })();
    const cancelling = (async () => {
      for (const taskId of modernIds) {
        await sleep(LOAD_MS / (MODERN_TASKS + 1));
        const r = responseOf(await modern(urlB, 'tasks/cancel', { taskId }));
        expect(r.result).toBeDefined();
        cancelledAt.set(taskId, Date.now());
      }
    })();
    const fault = (async () => {
      await sleep(CUT_AT_MS);
      proxy.refuse(() => true);
      cut = proxy.cut(() => true);
      const from = Date.now();
      await sleep(OUTAGE_MS);
      proxy.refuse(undefined);
      outage = { from, to: Date.now() };
    })();
    await Promise.all([creating, cancelling, fault]);
    const loadEnded = Date.now();

    // What each task ended as, by the database's word (read through B).
    const finalStatus = new Map<string, string>();
    await waitFor(
      async () => {
        for (const id of legacyIds) {
          if (TERMINAL.has(finalStatus.get(id) ?? '')) continue;
          finalStatus.set(id, (await client.at(urlB).result('tasks/get', { taskId: id })).status);
        }
        return legacyIds.filter((id) => !TERMINAL.has(finalStatus.get(id)!)).length;
      },
      (left) => left === 0,
      { timeoutMs: 10000, intervalMs: 200, what: 'every legacy task to end' },
    );

    // Every committed change: each legacy task's creation and its end; each cancel, per subscriber.
    const missing = () => {
      let legacy = 0;
      for (const id of legacyIds) {
        const heard = statusesOf(feed, id);
        if (!heard.includes('working')) legacy++;
        if (!heard.includes(finalStatus.get(id)!)) legacy++;
      }
      const perSub = subs.map(
        (sub) => modernIds.filter((id) => !statusesOf(sub, id).includes('cancelled')).length,
      );
      return { legacy, perSub };
    };
    const deadline = Date.now() + DELIVERY_DEADLINE_MS;
    await waitFor(
      async () => missing(),
      (m) => m.legacy + m.perSub.reduce((x, y) => x + y, 0) === 0 || Date.now() > deadline,
      { timeoutMs: DELIVERY_DEADLINE_MS + 5000, intervalMs: 100 },
    );
    const { legacy: lostLegacy, perSub: lostModern } = missing();

    await feed.stop();
    for (const sub of subs) await sub.stop();

    const out = a.output();
    const readFailures = (out.match(/stream drain failed|task subscription read failed/g) ?? []).length;
    const listenerReconnected = /LISTEN connection re-established/.test(out);
    const cancelsDuringOutage = [...cancelledAt.values()].filter(
      (t) => outage && t >= outage.from && t <= outage.to,
    ).length;
    const duplicates =
      legacyIds.filter((id) => statusesOf(feed, id).filter((s) => TERMINAL.has(s)).length > 1).length +
      subs
        .map((sub) =>
          modernIds.filter((id) => statusesOf(sub, id).filter((s) => s === 'cancelled').length > 1),
        )
        .flat().length;

    figure(SCENARIO, 'pooled connections of A cut', cut);
    figure(SCENARIO, 'A’s LISTEN connection reconnected', listenerReconnected ? 'yes' : 'no');
    figure(SCENARIO, 'failed re-reads on A (drains, listens)', readFailures);
    figure(SCENARIO, 'legacy tasks created under load', legacyIds.length);
    figure(SCENARIO, 'cancels committed while A’s pool was cut', `${cancelsDuringOutage} of ${MODERN_TASKS}`);
    figure(SCENARIO, 'notifications lost, 2025-11-25 GET stream', lostLegacy, `of ${legacyIds.length * 2}`);
    for (const [i, n] of lostModern.entries()) {
      figure(SCENARIO, `notifications lost, 2026-07-28 subscriber ${i + 1}`, n, `of ${MODERN_TASKS}`);
    }
    figure(SCENARIO, 'changes announced more than once', duplicates);
    // How long after the pool came back the changes committed during the cut were delivered (the retries).
    const during = (t: number | undefined) =>
      t !== undefined && !!outage && t >= outage.from && t <= outage.to;
    const lateness = [
      ...legacyIds
        .filter((id) => during(createdAt.get(id)))
        .map((id) => feed.heard.find((h) => h.taskId === id)?.at),
      ...subs.flatMap((sub) =>
        modernIds
          .filter((id) => during(cancelledAt.get(id)))
          .map((id) => sub.heard.find((h) => h.taskId === id && h.status === 'cancelled')?.at),
      ),
    ]
      .filter((t): t is number => t !== undefined)
      .map((t) => Math.max(0, t - outage!.to));
    figure(
      SCENARIO,
      'changes committed during the cut, delivered after the pool was back within',
      lateness.length ? Math.max(...lateness) : 'n/a',
      'ms',
    );
    figure(SCENARIO, 'load ended to last delivery', Math.max(0, Date.now() - loadEnded), 'ms');

    // The fault happened as aimed: A's pool was cut, its listener was not, and its re-reads failed.
    expect(cut).toBeGreaterThan(0);
    expect(listenerReconnected).toBe(false);
    expect(readFailures).toBeGreaterThan(0);
    expect(cancelsDuringOutage).toBeGreaterThan(0);
    if (lostLegacy + lostModern.reduce((x, y) => x + y, 0) > 0) {
      throw new Error(
        `notifications lost: stream ${lostLegacy}, subscribers ${JSON.stringify(lostModern)}; A's log:\n${tail(a)}`,
      );
    }
    expect(duplicates).toBe(0);
  });
});
