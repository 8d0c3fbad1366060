import { setTimeout as sleep } from 'node:timers/promises';
import { responseOf } from '../support/mcp-http.js';
import type { ServerProcess } from '../support/server-process.js';
import { LegacyClient, modern, waitFor } from '../support/tasks-e2e.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import {
  chaosEnv,
  figure,
  legacyCall,
  SessionFeed,
  startInstances,
  statusesOf,
  stopAll,
  SubscriptionFeed,
  TERMINAL,
  tail,
} from './support/chaos-kit.js';

const SCENARIO = 'SIGTERM of one instance';
const GRACE_MS = 4000;
const DRAIN_DELAY_MS = 1000;
const INLINE_S = 1.5;

/**
 * One of two instances gets SIGTERM while it runs tasks, answers inline calls and holds open streams.
 * In-flight calls finish or fail with an answer (never a silent reset), its streams close, its long tasks
 * fail "server shutting down" at once (not after a lease), and the other instance serves everything after:
 * resumed streams, results, new work.
 */
describe('chaos: SIGTERM on one of two instances', () => {
  let db: TestDatabase;
  let servers: ServerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('chaos_sigterm');
    servers = await startInstances(
      2,
      chaosEnv(db.url, {
        SHUTDOWN_GRACE_MS: String(GRACE_MS),
        SHUTDOWN_DRAIN_DELAY_MS: String(DRAIN_DELAY_MS),
        TASK_LEASE_MS: '30000',
      }),
    );
  });
  afterAll(async () => {
    await stopAll(servers, 'sigterm');
    await db.drop();
  });

  it('drains honestly and leaves everything to the other instance', async () => {
    const [leaving, staying] = servers;
    const urlL = `${leaving.baseUrl}/mcp`;
    const urlS = `${staying.baseUrl}/mcp`;
    let streamsUrl = urlL;

    // Two sessions whose GET streams are held by the leaving instance; after it is gone they resume on the other.
    const clients = [await LegacyClient.open(urlL), await LegacyClient.open(urlL)];
    const feeds = clients.map((c) => new SessionFeed(c.sessionId, () => streamsUrl));
    for (const f of feeds) await f.start();

    const short = await Promise.all(
      clients.map((c) => c.createTask('slow_compute', { seconds: 2, label: 'short' })),
    );
    const long = await Promise.all(clients.map((c) => c.createTask('slow_compute', { seconds: 120 })));
    const escalated = responseOf(
      await modern(urlL, 'tools/call', { name: 'slow_compute', arguments: { seconds: 120 } }),
    ).result;
    expect(escalated.resultType).toBe('task');
    const sub = new SubscriptionFeed([escalated.taskId], () => urlS);
    await sub.start();

    // Inline calls in flight at the signal (shorter than the grace period).
    const inline = clients.map((c, i) =>
      legacyCall(urlL, c.sessionId, 'tools/call', {
        name: 'slow_compute',
        arguments: { seconds: INLINE_S, label: `inline${i}` },
      }),
    );
    // A blocking tasks/result on the leaving instance for a task that outlives the grace period.
    const waiting = legacyCall(urlL, clients[1].sessionId, 'tasks/result', { taskId: long[1].taskId });
    await sleep(300);

    const signalledAt = Date.now();
    leaving.proc.kill('SIGTERM');
    await sleep(100);
    // Readiness is off, but a request that still arrives during the drain delay is served...
    const ready = await fetch(`${leaving.baseUrl}/health/ready`).then((r) => r.status);
    const served = await legacyCall(urlL, clients[0].sessionId, 'ping', {});
    await sleep(DRAIN_DELAY_MS);
    // ...and after it, the instance no longer takes connections (or refuses on one still open).
    const refused = await legacyCall(urlL, clients[0].sessionId, 'ping', {});
    const exitCode = await Promise.race([leaving.exited, sleep(GRACE_MS + 15000, 'timeout', { ref: false })]);
    const exitedMs = Date.now() - signalledAt;
    const answers = await Promise.all(inline);
    const waited = await waiting;
    streamsUrl = urlS;

    // Everything after is served by the other instance.
    const ids = [...short, ...long].map((t) => t.taskId);
    const owners = [...short, ...long].map((_, i) => clients[i % clients.length]);
    const finals = await Promise.all(
      ids.map((taskId, i) =>
        waitFor(
          () => owners[i].at(urlS).result('tasks/get', { taskId }),
          (t) => TERMINAL.has(t.status),
          { timeoutMs: 15000, intervalMs: 200, what: `task ${taskId} to end` },
        ),
      ),
    );
    const results = await Promise.all(
      ids.map((taskId, i) => owners[i].at(urlS).call('tasks/result', { taskId })),
    );
    const fresh = await clients[0].at(urlS).createTask('slow_compute', { seconds: 0, label: 'after' });
    const freshResult = await clients[0].at(urlS).result('tasks/result', { taskId: fresh.taskId });

    // Every change announced on the resumed streams (and on the subscription for the 2026-07-28 task).
    const heardAll = async () =>
      ids.every((id, i) => statusesOf(feeds[i % feeds.length], id).some((s) => TERMINAL.has(s))) &&
      statusesOf(feeds[0], fresh.taskId).includes('completed') &&
      statusesOf(sub, escalated.taskId).includes('failed');
    await waitFor(heardAll, (v) => v, { timeoutMs: 15000, intervalMs: 100 }).catch(() => undefined);
    for (const f of feeds) await f.stop();
    await sub.stop();
    const expected = [
      ...ids.map((id, i) => ({
        what: `legacy ${id.slice(0, 6)}`,
        feed: feeds[i % feeds.length],
        id,
        end: finals[i].status,
      })),
      { what: 'legacy after', feed: feeds[0], id: fresh.taskId, end: 'completed' },
      { what: 'modern', feed: sub, id: escalated.taskId, end: 'failed' },
    ];
    const missed = expected
      .filter((e) => !statusesOf(e.feed, e.id).includes(e.end))
      .map((e) => `${e.what} ${e.end}, heard [${statusesOf(e.feed, e.id).join(',')}]`);
    const lostNotifications = missed.length;

    const inlineOk = answers.filter((a) => a.status === 200 && a.response?.result).length;
    const inlineErr = answers.filter((a) => a.status > 0 && a.response?.error).length;
    const inlineSilent = answers.length - inlineOk - inlineErr;
    const shortLost = finals.slice(0, short.length).filter((t) => t.status !== 'completed').length;
    figure(SCENARIO, 'grace', GRACE_MS, 'ms');
    figure(SCENARIO, 'process exit code', String(exitCode));
    figure(SCENARIO, 'exited after the signal', exitedMs, 'ms');
    figure(SCENARIO, 'drain delay', DRAIN_DELAY_MS, 'ms');
    figure(SCENARIO, 'readiness during the drain delay', ready);
    figure(SCENARIO, 'new request during the drain delay', served.status);
    figure(SCENARIO, 'new request after the drain delay', refused.status || refused.error || '');
    figure(
      SCENARIO,
      'in-flight inline calls: answered / failed with an error / no answer',
      `${inlineOk} / ${inlineErr} / ${inlineSilent}`,
    );
    figure(
      SCENARIO,
      'long tasks ended',
      finals
        .slice(short.length)
        .map((t) => `${t.status} (${t.statusMessage})`)
        .join('; '),
    );
    figure(SCENARIO, 'results lost (short tasks finished within the grace)', shortLost);
    figure(
      SCENARIO,
      'blocking tasks/result at the drain',
      `${waited.status} ${waited.response?.error?.message ?? waited.error ?? ''}`,
    );
    figure(SCENARIO, 'streams reopened on the other instance', feeds.map((f) => f.reopened).join(', '));
    figure(SCENARIO, 'notifications lost', lostNotifications, missed.length ? JSON.stringify(missed) : '');

    if (exitCode !== 0) throw new Error(`exit ${exitCode}; log:\n${tail(leaving)}`);
    expect(ready).toBe(503);
    expect(served.status).toBe(200);
    expect(served.response).toEqual(expect.objectContaining({ result: {} }));
    // 0: connection refused (nothing sent, so a balancer retries it anywhere); 503 on a connection kept open.
    expect([0, 503]).toContain(refused.status);
    expect(inlineSilent).toBe(0);
    // The wait ends with an answer to repeat (elsewhere), not a connection cut at the end of the grace.
    expect(waited.status).toBe(200);
    expect(waited.response.error).toEqual({
      code: -32000,
      message: 'The server is restarting and the task is still running; call tasks/result again',
      data: { taskId: long[1].taskId, status: 'working' },
    });
    for (const [i, a] of answers.entries()) {
      if (a.response?.result) {
        expect(a.response.result.content).toEqual([
          { type: 'text', text: `Computed inline${i} after ${INLINE_S} s` },
        ]);
      }
    }
    // The streams the leaving instance held were closed, and resumed on the other one.
    for (const f of feeds) expect(f.reopened).toBeGreaterThanOrEqual(1);
    expect(shortLost).toBe(0);
    for (const [i, r] of results.slice(0, short.length).entries()) {
      expect(r.result.content).toEqual([{ type: 'text', text: 'Computed short after 2 s' }]);
      expect(finals[i].status).toBe('completed');
    }
    for (const [i, t] of finals.slice(short.length).entries()) {
      expect(t.status).toBe('failed');
      expect(results[short.length + i].error).toEqual(
        expect.objectContaining({ message: expect.any(String) }),
      );
    }
    expect(freshResult.content).toEqual([{ type: 'text', text: 'Computed after after 0 s' }]);
    expect(lostNotifications).toBe(0);
  });
});
