import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from '../../src/database/embedded-postgres.js';
import { openSession, responseOf } from '../support/mcp-http.js';
import type { ServerProcess } from '../support/server-process.js';
import { modern, waitFor } from '../support/tasks-e2e.js';
import { withClient } from '../support/test-database.js';
import {
  chaosEnv,
  figure,
  legacyCall,
  ReadinessProbe,
  SessionFeed,
  startInstances,
  statusesOf,
  stopAll,
  SubscriptionFeed,
  TERMINAL,
  tail,
} from './support/chaos-kit.js';

const SCENARIO = 'PostgreSQL restart';
const LEASE_MS = 3000;
const OUTAGE_MS = 4000;
const HEALTH_TIMEOUT_MS = 1000;
/** Work lengths of the tasks created before the outage: some end before it, some during, some after. */
const WORK_S = [0.5, 1.5, 2.5, 3.5, 4.5, 6, 8, 10];
const LOAD_EVERY_MS = 100;
const LOAD_MAX_REQUESTS = 400;

interface Sent {
  instance: number;
  kind: string;
  sentAt: number;
  doneAt: number;
  status: number;
  /** The JSON-RPC error code, when the request was answered with one. */
  rpcError?: number;
  /** The Retry-After header of the answer, if any. */
  retryAfter?: string;
}

interface Made {
  taskId: string;
  era: 'legacy' | 'modern';
  session: number;
  /** What tasks/result or the detailed task must carry once completed. */
  text: string;
  /** When its work should have ended (test clock): before, during or after the outage. */
  endsAt: number;
}

/**
 * PostgreSQL (a private embedded server, never the shared one) is stopped and started again on the same
 * port while two instances serve steady traffic. Readiness must turn 503 during the outage and 200 after;
 * no request may get a 5xx outside the outage window; every task created before the outage must end with
 * its result; every committed change must reach its stream or subscription.
 */
describe('chaos: PostgreSQL restart under steady load on two instances', () => {
  let parent: string;
  let pgHandle: EmbeddedPostgresHandle | undefined;
  let servers: ServerProcess[] = [];

  const startPg = (port?: number) =>
    startEmbeddedPostgres({
      dataDir: join(parent, 'data'),
      createOsUser: false,
      databaseName: 'chaos',
      port,
    });

  beforeAll(async () => {
    parent = mkdtempSync(join(tmpdir(), 'mcp-chaos-pg-'));
    // As root the postgres OS user must be able to enter the folder; mkdtemp makes it 0700.
    chmodSync(parent, 0o755);
    pgHandle = await startPg();
    servers = await startInstances(
      2,
      chaosEnv(pgHandle.url, {
        TASK_LEASE_MS: String(LEASE_MS),
        HEALTH_DB_TIMEOUT_MS: String(HEALTH_TIMEOUT_MS),
      }),
    );
  });
  afterAll(async () => {
    await stopAll(servers, 'postgres-restart');
    await pgHandle?.stop();
    rmSync(parent, { recursive: true, force: true });
  });

  it('keeps every result and every announcement, with 5xx only during the outage', async () => {
    const urls = servers.map((s) => `${s.baseUrl}/mcp`);
    const port = Number(new URL(pgHandle!.url).port);

    // Two sessions, each opened on one instance and listening on the other.
    const sessions = [await openSession(urls[0]), await openSession(urls[1])];
    const feeds = sessions.map((id, i) => new SessionFeed(id, () => urls[1 - i]));
    for (const f of feeds) await f.start();

    const made: Made[] = [];
    for (const [i, seconds] of WORK_S.entries()) {
      const s = i % 2;
      const label = `pre${i}`;
      const r = await legacyCall(urls[i % 2], sessions[s], 'tools/call', {
        name: 'slow_compute',
        arguments: { seconds, label },
        task: {},
      });
      made.push({
        taskId: r.response.result.task.taskId,
        era: 'legacy',
        session: s,
        text: `Computed ${label} after ${seconds} s`,
        endsAt: Date.now() + seconds * 1000,
      });
    }
    for (const [i, seconds] of [2.5, 5].entries()) {
      const label = `mod${i}`;
      const r = responseOf(
        await modern(urls[i], 'tools/call', { name: 'slow_compute', arguments: { seconds, label } }),
      ).result;
      expect(r.resultType).toBe('task');
      made.push({
        taskId: r.taskId,
        era: 'modern',
        session: -1,
        text: `Computed ${label} after ${seconds} s`,
        endsAt: Date.now() + seconds * 1000,
      });
    }
    const preOutage = made.length;
    const sub = new SubscriptionFeed(
      made.filter((m) => m.era === 'modern').map((m) => m.taskId),
      () => urls[0],
    );
    await sub.start();

    const probes = servers.map((s) => new ReadinessProbe(s.baseUrl, 100));
    const sent: Sent[] = [];
    let loading = true;
    const load = urls.map(async (url, instance) => {
      for (let n = 0; n < LOAD_MAX_REQUESTS && loading; n++) {
        const kind = ['create', 'get', 'list'][n % 3];
        const sentAt = Date.now();
        const session = sessions[instance];
        const r =
          kind === 'create'
            ? await legacyCall(url, session, 'tools/call', {
                name: 'slow_compute',
                arguments: { seconds: 0, label: `load${instance}.${n}` },
                task: {},
              })
            : kind === 'get'
              ? await legacyCall(url, session, 'tasks/get', { taskId: made[n % preOutage].taskId })
              : await legacyCall(url, session, 'tasks/list', {});
        sent.push({
          instance,
          kind,
          sentAt,
          doneAt: Date.now(),
          status: r.status,
          rpcError: r.response?.error?.code,
          retryAfter: r.retryAfter,
        });
        const task = r.response?.result?.task;
        if (kind === 'create' && task) {
          made.push({
            taskId: task.taskId,
            era: 'legacy',
            session: instance,
            text: `Computed load${instance}.${n} after 0 s`,
            endsAt: Date.now(),
          });
        }
        await sleep(LOAD_EVERY_MS);
      }
    });

    await sleep(1500);
    const stopBegan = Date.now();
    await pgHandle!.stop();
    const downAt = Date.now();
    await sleep(OUTAGE_MS);
    pgHandle = await startPg(port);
    const upAt = Date.now();

    const readyAt = await Promise.all(
      probes.map((p) =>
        waitFor(
          async () => p.firstAfter(upAt, 200),
          (s) => s !== undefined,
          { timeoutMs: 30000, intervalMs: 100, what: 'readiness after the restart' },
        ).then((s) => s!.at),
      ),
    );
    const allReadyAt = Math.max(...readyAt);
    await sleep(3000);
    loading = false;
    await Promise.all(load);
    for (const p of probes) await p.stop();

    // Every task reaches a terminal state, and a completed one carries its result.
    const finals = await Promise.all(
      made.map(async (m) => {
        const read = async () =>
          m.era === 'legacy'
            ? (await legacyCall(urls[0], sessions[m.session], 'tasks/get', { taskId: m.taskId })).response
                ?.result
            : responseOf(await modern(urls[0], 'tasks/get', { taskId: m.taskId })).result;
        return waitFor(read, (t) => TERMINAL.has(t?.status), {
          timeoutMs: 30000,
          intervalMs: 250,
          what: `task ${m.taskId} to end`,
        }).catch(() => undefined);
      }),
    );
    const resultText = async (m: Made, i: number): Promise<string | undefined> => {
      if (finals[i]?.status !== 'completed') return undefined;
      if (m.era === 'modern') return finals[i].result?.content?.[0]?.text;
      const r = await legacyCall(urls[1], sessions[m.session], 'tasks/result', { taskId: m.taskId });
      return r.response?.result?.content?.[0]?.text;
    };
    const texts = await Promise.all(made.map(resultText));
    const lost = made.filter((m, i) => texts[i] !== m.text);

    const heard = (m: Made, i: number) =>
      m.era === 'legacy'
        ? statusesOf(feeds[m.session], m.taskId).includes(finals[i]?.status)
        : statusesOf(sub, m.taskId).includes(finals[i]?.status);
    await waitFor(
      async () => made.every(heard),
      (v) => v,
      { timeoutMs: 15000, intervalMs: 100 },
    ).catch(() => undefined);
    for (const f of feeds) await f.stop();
    await sub.stop();
    const unannounced = made.filter((m, i) => !heard(m, i));

    const outside = sent.filter((r) => r.doneAt < stopBegan || r.sentAt > allReadyAt);
    const inside = sent.filter((r) => !outside.includes(r));
    const is5xx = (r: Sent) => r.status >= 500;
    // A request can also fail inside a 200 (a JSON-RPC internal error): none of these requests may fail at all.
    const failed = (r: Sent) => r.status !== 200 || r.rpcError !== undefined;
    const shape = (rs: Sent[]) =>
      JSON.stringify(
        rs.reduce<Record<string, number>>((acc, r) => {
          const k = `${r.status}${r.rpcError !== undefined ? `/${r.rpcError}` : ''}`;
          acc[k] = (acc[k] ?? 0) + 1;
          return acc;
        }, {}),
      );
    const readinessDuringOutage = probes.map((p) =>
      p.samples.filter((s) => s.at > downAt + HEALTH_TIMEOUT_MS + 200 && s.at < upAt),
    );

    figure(SCENARIO, 'outage (stop begun → started again)', upAt - stopBegan, 'ms');
    figure(SCENARIO, 'task lease (the outage outlasts it)', LEASE_MS, 'ms');
    figure(
      SCENARIO,
      'readiness during the outage (A, B)',
      readinessDuringOutage.map((s) => [...new Set(s.map((x) => x.status))].join('/')).join(', '),
    );
    figure(SCENARIO, 'time to ready after restart (A, B)', readyAt.map((t) => t - upAt).join(', '), 'ms');
    figure(SCENARIO, 'requests sent', sent.length);
    figure(SCENARIO, '5xx during the outage window', inside.filter(is5xx).length, `of ${inside.length}`);
    figure(SCENARIO, '5xx outside the outage window', outside.filter(is5xx).length, `of ${outside.length}`);
    figure(SCENARIO, 'answers during the outage window (HTTP/JSON-RPC code: count)', shape(inside));
    figure(
      SCENARIO,
      'failed requests outside the outage window',
      outside.filter(failed).length,
      shape(outside),
    );
    figure(SCENARIO, 'tasks checked (before the outage / all)', `${preOutage} / ${made.length}`);
    figure(
      SCENARIO,
      'results lost',
      lost.length,
      lost.length
        ? JSON.stringify(
            lost.map((m) => {
              const t = finals[made.indexOf(m)];
              const when = m.endsAt < stopBegan ? 'before' : m.endsAt <= upAt ? 'during' : 'after';
              return `${m.era} ${m.text.split(' ')[1]} (work ended ${when} the outage): ${t?.status ?? 'not terminal'} ${t?.statusMessage ?? ''}`;
            }),
          )
        : '',
    );
    // For each unannounced legacy change: was it at least written to the SSE event log (then delivery failed)?
    const logged = await withClient(pgHandle.url, async (c) =>
      Promise.all(
        unannounced.map(async (m) => {
          if (m.era !== 'legacy') return 'n/a';
          const r = await c.query(
            `SELECT count(*)::int AS n FROM mcp_sse_event
              WHERE payload->>'method' = 'notifications/tasks/status' AND payload->'params'->>'taskId' = $1
                AND payload->'params'->>'status' = $2`,
            [m.taskId, finals[made.indexOf(m)]?.status],
          );
          return r.rows[0].n > 0 ? 'logged' : 'never logged';
        }),
      ),
    );
    figure(
      SCENARIO,
      'notifications lost',
      unannounced.length,
      unannounced.length
        ? JSON.stringify(
            unannounced.map((m, i) => {
              const final = finals[made.indexOf(m)]?.status ?? 'not terminal';
              const got =
                m.era === 'legacy' ? statusesOf(feeds[m.session], m.taskId) : statusesOf(sub, m.taskId);
              return `${m.era} ${m.text.split(' ')[1]} ${final} (${logged[i]}), heard [${got.join(',')}]`;
            }),
          )
        : '',
    );
    figure(SCENARIO, 'streams reopened', feeds.map((f) => f.reopened).join(', '));

    if (lost.length > 0 || unannounced.length > 0) {
      throw new Error(
        `results lost ${lost.length}, notifications lost ${unannounced.length}; ` +
          `instance A log:\n${tail(servers[0], 25)}\ninstance B log:\n${tail(servers[1], 25)}`,
      );
    }
    for (const samples of readinessDuringOutage) {
      expect(samples.length).toBeGreaterThan(0);
      expect(samples.every((s) => s.status === 503)).toBe(true);
    }
    expect(outside.filter(is5xx)).toEqual([]);
    expect(outside.filter(failed)).toEqual([]);
    // During the outage a request either succeeds or is told to retry (503 + Retry-After), never a final
    // JSON-RPC error inside a 200.
    expect(inside.filter((r) => r.status === 200 && r.rpcError !== undefined)).toEqual([]);
    expect(inside.filter((r) => r.status === 503 && !r.retryAfter)).toEqual([]);
    expect(finals.slice(0, preOutage).every((t) => t?.status === 'completed')).toBe(true);
  });
});
