import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, cpSync, mkdtempSync, readlinkSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from '../../src/database/embedded-postgres.js';
import { LEGACY, responseOf, rpc } from '../support/mcp-http.js';
import type { ServerProcess } from '../support/server-process.js';
import { modern, rpcId } from '../support/tasks-e2e.js';
import { withClient } from '../support/test-database.js';
import {
  chaosEnv,
  figure,
  legacyCall,
  pollUntil,
  readiness,
  ReadinessProbe,
  startInstances,
  stopAll,
  tail,
} from './support/chaos-kit.js';

const SCENARIO = 'read-only failover';
/** How long the address leads to the read-only standby. */
const READ_ONLY_MS = 6000;
const LOAD_EVERY_MS = 100;
const LOAD_MAX_REQUESTS = 600;

/**
 * One loopback address in front of whichever PostgreSQL it currently leads to, as a DNS name or a virtual IP
 * does across a failover: connections made keep their server; `cut` drops them (a failover drops every one).
 */
class MovableAddress {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private constructor(private targetPort: number) {
    this.server = net.createServer((client) => {
      const upstream = net.connect(this.targetPort, '127.0.0.1');
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => {
          this.sockets.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
  }

  static async start(targetPort: number): Promise<MovableAddress> {
    const a = new MovableAddress(targetPort);
    await new Promise<void>((r) => a.server.listen(0, '127.0.0.1', r));
    return a;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  moveTo(port: number): void {
    this.targetPort = port;
  }

  cut(): void {
    for (const s of this.sockets) s.destroy();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

interface Sent {
  kind: string;
  phase: string;
  status: number;
  rpcError?: number;
  message?: string;
  retryAfter?: string;
}

interface Made {
  taskId: string;
  era: 'legacy' | 'modern';
}

function withPort(url: string, port: number): string {
  const u = new URL(url);
  u.port = String(port);
  return u.toString();
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/**
 * A primary and a synchronous hot standby (a copy of the primary's cleanly stopped data directory, streaming
 * from it) behind one loopback address, one server instance on it, steady traffic in both eras:
 * - the address leads to the read-only standby for a while (every connection cut, as at a failover; DNS
 *   cached the standby), then back to the primary without a cut: writes get 503 with Retry-After, reads are
 *   served, readiness is 503 while the database is unwritable and 200 after;
 * - a clean failover: the primary stopped, the standby promoted, the address moved.
 * No answer is a final error (never 200 with -32603, never a 5xx other than 503 with Retry-After), and every
 * task created with a 200 answer completes.
 */
describe('chaos: the address leads to a read-only standby, then a clean failover', () => {
  let parent: string;
  let primary: EmbeddedPostgresHandle | undefined;
  let standby: ChildProcess | undefined;
  let address: MovableAddress | undefined;
  let servers: ServerProcess[] = [];
  let primaryPort = 0;
  let standbyPort = 0;
  let primaryUrl = '';

  beforeAll(async () => {
    parent = mkdtempSync(join(tmpdir(), 'mcp-chaos-ro-'));
    chmodSync(parent, 0o755);
    const start = (port?: number) =>
      startEmbeddedPostgres({
        dataDir: join(parent, 'primary'),
        createOsUser: false,
        databaseName: 'chaos',
        port,
      });
    primary = await start();
    primaryUrl = primary.url;
    primaryPort = Number(new URL(primaryUrl).port);
    // The postgres binary the primary runs, and who it runs as (root starts it as the postgres OS user).
    const bin = await withClient(primaryUrl, async (c) => {
      await c.query(`ALTER SYSTEM SET synchronous_standby_names = '*'`);
      await c.query(`ALTER SYSTEM SET synchronous_commit = 'remote_apply'`);
      const row = (await c.query('SELECT pg_backend_pid() AS pid')).rows[0] as { pid: number };
      return readlinkSync(`/proc/${row.pid}/exe`);
    });
    await primary.stop();
    const standbyDir = join(dirname(primary.dataDir), 'standby');
    cpSync(primary.dataDir, standbyDir, { recursive: true, preserveTimestamps: true });
    standbyPort = await freePort();
    const u = new URL(primaryUrl);
    writeFileSync(join(standbyDir, 'standby.signal'), '');
    appendFileSync(
      join(standbyDir, 'postgresql.auto.conf'),
      `primary_conninfo = 'host=127.0.0.1 port=${primaryPort} user=postgres password=${decodeURIComponent(u.password)} application_name=standby'\n` +
        `synchronous_standby_names = ''\n`,
    );
    const asRoot = process.getuid?.() === 0;
    const ids = asRoot
      ? {
          uid: Number(execFileSync('id', ['-u', 'postgres']).toString()),
          gid: Number(execFileSync('id', ['-g', 'postgres']).toString()),
        }
      : {};
    if (asRoot) execFileSync('chown', ['-R', 'postgres:postgres', standbyDir]);
    chmodSync(standbyDir, 0o700);
    primary = await start(primaryPort);
    standby = spawn(
      bin,
      [
        '-D',
        standbyDir,
        '-p',
        String(standbyPort),
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
      ],
      { ...ids, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    standby.stderr?.resume();
    const streaming = await pollUntil(
      () =>
        withClient(primaryUrl, async (c) => {
          const r = await c.query(`SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'`);
          return (r.rows[0] as { sync_state?: string } | undefined)?.sync_state;
        }).catch(() => undefined),
      (s) => s === 'sync',
      60000,
      250,
    );
    expect(streaming).toBe('sync');

    address = await MovableAddress.start(primaryPort);
    servers = await startInstances(1, chaosEnv(withPort(primaryUrl, address.port), { DB_POOL_MAX: '8' }));
  }, 150000);

  afterAll(async () => {
    await stopAll(servers, 'readonly-failover');
    await address?.close();
    standby?.kill('SIGINT');
    await primary?.stop();
    if (standby && standby.exitCode === null) await new Promise((r) => standby!.once('exit', r));
    rmSync(parent, { recursive: true, force: true });
  });

  it('answers only successes or 503 with Retry-After, loses no acknowledged task, readiness tells the truth', async () => {
    const server = servers[0];
    const url = `${server.baseUrl}/mcp`;
    const sent: Sent[] = [];
    const made: Made[] = [];
    let phase = 'before';

    const record = (
      kind: string,
      a: { status: number; headers?: Headers; json?: any },
      response: any,
    ): void => {
      sent.push({
        kind,
        phase,
        status: a.status,
        rpcError: response?.error?.code,
        message: response?.error?.message,
        retryAfter: a.headers?.get('retry-after') ?? undefined,
      });
    };

    /** A legacy session, opened again whenever initialize is refused with 503. */
    const openLegacy = async (): Promise<string | undefined> => {
      const a = await rpc(url, {
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'chaos', version: '1' } },
      });
      record('legacy initialize', a, responseOf(a));
      const id = a.headers.get('mcp-session-id');
      if (a.status !== 200 || !id) return undefined;
      const ack = await rpc(
        url,
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        { 'mcp-session-id': id, 'mcp-protocol-version': LEGACY },
      );
      return ack.status === 202 ? id : undefined;
    };
    let session = await openLegacy();
    expect(session).toBeDefined();

    let stop = false;
    const load = (async () => {
      for (let i = 0; i < LOAD_MAX_REQUESTS && !stop; i++) {
        const kind = i % 6;
        if (kind === 0) {
          const s = await openLegacy();
          if (s) session = s;
        } else if (kind === 1 && session) {
          const r = await legacyCall(url, session, 'tools/call', {
            name: 'slow_compute',
            arguments: { seconds: 0.5, label: `l${i}` },
            task: {},
          });
          record('legacy tools/call task', { status: r.status }, r.response);
          sent[sent.length - 1].retryAfter = r.retryAfter;
          const taskId = r.status === 200 ? r.response?.result?.task?.taskId : undefined;
          if (taskId) made.push({ taskId, era: 'legacy' });
        } else if (kind === 2) {
          const a = await modern(url, 'tools/call', {
            name: 'slow_compute',
            arguments: { seconds: 1.5, label: `m${i}` },
          });
          const response = responseOf(a);
          record('modern tools/call', a, response);
          if (a.status === 200 && response?.result?.resultType === 'task')
            made.push({ taskId: response.result.taskId, era: 'modern' });
        } else if (kind === 3 && session) {
          const known = made.filter((m) => m.era === 'legacy');
          if (known.length > 0) {
            const r = await legacyCall(url, session, 'tasks/get', { taskId: known[i % known.length].taskId });
            record('legacy tasks/get', { status: r.status }, r.response);
            sent[sent.length - 1].retryAfter = r.retryAfter;
          }
        } else if (kind === 4) {
          const known = made.filter((m) => m.era === 'modern');
          if (known.length > 0) {
            const a = await modern(url, 'tasks/get', { taskId: known[i % known.length].taskId });
            record('modern tasks/get', a, responseOf(a));
          }
        } else if (kind === 5 && session) {
          // tasks/cancel locks the task's row first (SELECT FOR UPDATE): a write, even for an unknown task.
          const taskId = `unknown-${rpcId()}`;
          if (i % 12 === 5) {
            const r = await legacyCall(url, session, 'tasks/cancel', { taskId });
            record('legacy tasks/cancel', { status: r.status }, r.response);
            sent[sent.length - 1].retryAfter = r.retryAfter;
          } else {
            const a = await modern(url, 'tasks/cancel', { taskId });
            record('modern tasks/cancel', a, responseOf(a));
          }
        }
        await sleep(LOAD_EVERY_MS);
      }
    })();

    const probe = new ReadinessProbe(server.baseUrl, 100);
    await sleep(2000);

    // Phase 1: every connection drops and the address leads to the read-only standby for a while.
    phase = 'read-only';
    const readOnlyAt = Date.now();
    address!.moveTo(standbyPort);
    address!.cut();
    await sleep(READ_ONLY_MS);
    // ... then back to the primary, without a cut: the instance's connections to the standby stay open.
    phase = 'back';
    const backAt = Date.now();
    address!.moveTo(primaryPort);
    const readyAgain = await pollUntil(
      () => readiness(server),
      (s) => s === 200,
      20000,
    );
    expect(readyAgain).toBe(200);
    await sleep(3000);

    // Phase 2: a clean failover: the primary stops, the standby is promoted, the address moves.
    phase = 'failover';
    const failoverAt = Date.now();
    await primary!.stop();
    await withClient(withPort(primaryUrl, standbyPort), (c) => c.query('SELECT pg_promote(true, 30)'));
    address!.moveTo(standbyPort);
    const promotedAt = Date.now();
    const readyAfterFailover = await pollUntil(
      () => readiness(server),
      (s) => s === 200,
      20000,
    );
    expect(readyAfterFailover).toBe(200);
    phase = 'after';
    await sleep(3000);
    stop = true;
    await load;
    await probe.stop();

    // Every task acknowledged with a 200 completes.
    const finals = await Promise.all(
      made.map(async (m) => {
        const read = async () => {
          if (m.era === 'modern')
            return responseOf(await modern(url, 'tasks/get', { taskId: m.taskId }))?.result?.status as
              string | undefined;
          const r = await legacyCall(url, session!, 'tasks/get', { taskId: m.taskId });
          return r.response?.result?.status as string | undefined;
        };
        return pollUntil(read, (s) => s === 'completed' || s === 'failed' || s === 'cancelled', 30000, 250);
      }),
    );

    const finalErrors = sent.filter(
      (s) =>
        (s.status === 200 && s.rpcError === -32603) ||
        (s.status >= 500 && (s.status !== 503 || !s.retryAfter)) ||
        s.status === 0,
    );
    const refused = sent.filter((s) => s.status === 503);
    const inReadOnly = probe.samples.filter((s) => s.at > readOnlyAt + 3000 && s.at < backAt);
    figure(SCENARIO, 'requests', sent.length);
    figure(SCENARIO, 'answered 503 with Retry-After', refused.length);
    figure(SCENARIO, 'final errors', finalErrors.length);
    figure(SCENARIO, 'tasks acknowledged', made.length);
    figure(
      SCENARIO,
      'ready again after the address moved back',
      (probe.firstAfter(backAt, 200)?.at ?? NaN) - backAt,
      'ms',
    );
    figure(
      SCENARIO,
      'ready again after the promote',
      (probe.firstAfter(promotedAt, 200)?.at ?? NaN) - promotedAt,
      'ms',
    );
    figure(
      SCENARIO,
      'not ready after the primary stopped',
      (probe.firstAfter(failoverAt, 503)?.at ?? NaN) - failoverAt,
      'ms',
    );

    const context = `\n${JSON.stringify(finalErrors.slice(0, 10))}\n${tail(server)}`;
    expect({ finalErrors: finalErrors.length, context }).toEqual({ finalErrors: 0, context });
    // The read-only period was exercised: writes were refused with 503, reads were served from the standby.
    expect(sent.filter((s) => s.phase === 'read-only' && s.status === 503).length).toBeGreaterThan(0);
    expect(
      sent.filter(
        (s) =>
          s.phase === 'read-only' &&
          s.kind.endsWith('tasks/get') &&
          s.status === 200 &&
          s.rpcError === undefined,
      ).length,
    ).toBeGreaterThan(0);
    // Readiness: 503 throughout the read-only period (past the first probe interval), 200 at the end.
    expect(inReadOnly.length).toBeGreaterThan(10);
    expect(inReadOnly.filter((s) => s.status === 200)).toEqual([]);
    expect(probe.samples.at(-1)?.status).toBe(200);
    // Nothing acknowledged is lost.
    expect(made.length).toBeGreaterThan(10);
    expect(finals.filter((s) => s !== 'completed')).toEqual([]);
  }, 170000);
});
