import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { inTransaction } from '../database/sql-transaction.js';
import { HealthService } from '../health/health.service.js';
import { createTestApp } from '../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { PgProxy } from '../../test/support/pg-proxy.js';
import { PgBusService } from './pg-bus.service.js';

function waitFor<T>(pred: () => T | undefined, ms = 5000): Promise<T> {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const tick = (): void => {
      const v = pred();
      if (v !== undefined) return resolve(v);
      if (Date.now() - t0 > ms) return reject(new Error('condition not met in time'));
      setTimeout(tick, 20);
    };
    tick();
  });
}

describe('PgBusService across two instances on one database', () => {
  let db: TestDatabase;
  let a: INestApplication;
  let b: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase('bus');
    a = await createTestApp(db.url);
    b = await createTestApp(db.url);
  });
  afterAll(async () => {
    await Promise.all([a.close(), b.close()]);
    await db.drop();
  });

  it('delivers a notification published on one instance to the other, tagged with its origin', async () => {
    const got: { payload: Record<string, unknown>; self: boolean }[] = [];
    const off = b
      .get(PgBusService)
      .subscribe('test_chan', (payload, meta) => got.push({ payload, self: meta.self }));
    // LISTEN for a new channel is issued asynchronously; a NOTIFY before it is in place is lost.
    await b.get(PgBusService).listening();
    try {
      await a.get(PgBusService).publish('test_chan', { id: 'x1' });
      const first = await waitFor(() => got[0]);
      expect(first).toEqual({ payload: { id: 'x1' }, self: false });
    } finally {
      off();
    }
  });

  it('delivers at commit and never on rollback', async () => {
    const got: unknown[] = [];
    const bus = a.get(PgBusService);
    const off = b.get(PgBusService).subscribe('tx_chan', (p) => got.push(p.id));
    await b.get(PgBusService).listening();
    try {
      await inTransaction(a.get(DataSource), { lockTimeoutMs: 0 }, async (tx) => {
        await bus.publish('tx_chan', { id: 'rolled-back' }, tx);
        throw new Error('abort');
      }).catch(() => undefined);
      await inTransaction(a.get(DataSource), { lockTimeoutMs: 0 }, async (tx) => {
        await bus.publish('tx_chan', { id: "it's \\ committed" }, tx);
        await new Promise((r) => setTimeout(r, 100));
        expect(got).toEqual([]); // not before commit
      });
      await waitFor(() => (got.length > 0 ? got : undefined));
      await new Promise((r) => setTimeout(r, 100));
      expect(got).toEqual(["it's \\ committed"]); // quotes and backslashes survive the literal
    } finally {
      off();
    }
  });

  it('refuses payloads that carry state instead of ids', async () => {
    await expect(a.get(PgBusService).publish('big_chan', { blob: 'x'.repeat(9000) })).rejects.toThrow(
      /send ids/,
    );
  });

  it('reconnects after its LISTEN connection is killed, reports it in readiness, and asks for a resync', async () => {
    const bus = b.get(PgBusService);
    let resyncs = 0;
    bus.onResync(() => resyncs++);
    const got: unknown[] = [];
    const off = bus.subscribe('after_chan', (p) => got.push(p.id));
    await bus.listening();
    try {
      const killed = await withClient(db.url, (c) =>
        c.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
           WHERE datname = current_database() AND application_name LIKE 'mcp-task-server-listen:%'`,
        ),
      );
      expect(killed.rowCount).toBe(2); // one listener per instance
      await waitFor(() => (bus.isConnected ? undefined : true));
      const report = await b.get(HealthService).readiness();
      expect(report.checks.listener.status).toBe('down');
      await waitFor(() => (resyncs > 0 && bus.isConnected ? true : undefined), 10000);
      expect((await b.get(HealthService).readiness()).checks.listener).toEqual({ status: 'up' });
      await waitFor(() => (a.get(PgBusService).isConnected ? true : undefined), 10000);
      await a.get(PgBusService).publish('after_chan', { id: 'again' });
      await waitFor(() => (got.length > 0 ? true : undefined));
      expect(got).toEqual(['again']);
    } finally {
      off();
    }
  });
});

/** The value of a counter (with these labels) in an app's registry. */
async function counter(
  app: INestApplication,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const metric = app.get(MetricsService).registry.getSingleMetric(name);
  if (!metric) return 0;
  const { values } = await metric.get();
  const hit = values.find((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want));
  return hit ? hit.value : 0;
}

/** Backends of this test database with this application_name (never anyone else's). */
async function backends(db: TestDatabase, applicationName: string): Promise<number[]> {
  const r = await withClient(db.url, (c) =>
    c.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = $2',
      [db.name, applicationName],
    ),
  );
  return r.rows.map((row) => row.pid);
}

describe('PgBusService liveness of the LISTEN connection (through a misbehaving network)', () => {
  let db: TestDatabase;
  let proxy: PgProxy;
  let app: INestApplication;
  let peer: INestApplication;
  let bus: PgBusService;
  let isListener: (name: string) => boolean;

  beforeAll(async () => {
    db = await createTestDatabase('bus_live');
    proxy = await PgProxy.start(db.url);
    // The instance under test reaches PostgreSQL through the proxy; its peer connects directly.
    app = await createTestApp(proxy.via(db.url), {
      BUS_HEARTBEAT_MS: '300',
      BUS_HEARTBEAT_TIMEOUT_MS: '1500',
      JANITOR_ENABLED: 'false',
    });
    peer = await createTestApp(db.url, { JANITOR_ENABLED: 'false' });
    bus = app.get(PgBusService);
    isListener = (name) => name === bus.applicationName;
  });
  afterAll(async () => {
    proxy.refuse(undefined);
    await Promise.all([app.close(), peer.close()]);
    await proxy.close();
    await db.drop();
  });

  /** Publishes from the peer until the instance under test hears it (or fails after `ms`). */
  async function heardFromPeer(channel: string, got: unknown[], ms = 10000): Promise<void> {
    const id = `m${Math.random().toString(36).slice(2)}`;
    await waitFor(() => {
      void peer.get(PgBusService).publish(channel, { id });
      return got.includes(id) ? true : undefined;
    }, ms);
  }

  it('notices a half-open LISTEN connection by its heartbeat, drops readiness, and reconnects', async () => {
    const got: unknown[] = [];
    const off = bus.subscribe('live_chan', (p) => got.push(p.id));
    await bus.listening();
    try {
      await heardFromPeer('live_chan', got);
      const failuresBefore = await counter(app, 'mcp_bus_heartbeat_failures_total');
      const [oldPid] = await backends(db, bus.applicationName);
      // The network dies under the listener: nothing arrives, nothing is closed (no error, no end event).
      // New listener connections are refused for a while, so the outage lasts until the test ends it.
      proxy.refuse(isListener);
      expect(proxy.blackHole(isListener)).toBe(1);
      await waitFor(() => (bus.isHealthy ? undefined : true), 10000);
      expect(await counter(app, 'mcp_bus_heartbeat_failures_total')).toBeGreaterThan(failuresBefore);
      // Readiness says so, naming the listener, while no new connection is up.
      const report = await app.get(HealthService).readiness();
      expect(report.status).toBe('error');
      expect(report.checks.listener.status).toBe('down');
      expect(report.checks.database).toEqual({ status: 'up' }); // the pool is fine: only the listener is dead
      // The silent socket was torn down, not left behind.
      await waitFor(() => (proxy.count(isListener) === 0 ? true : undefined), 10000);
      proxy.refuse(undefined);
      await waitFor(() => (bus.isHealthy ? true : undefined), 15000);
      expect((await app.get(HealthService).readiness()).checks.listener).toEqual({ status: 'up' });
      const [newPid, ...others] = await backends(db, bus.applicationName);
      expect(others).toEqual([]);
      expect(newPid).not.toBe(oldPid);
      // Cross-instance delivery works again.
      await heardFromPeer('live_chan', got);
    } finally {
      off();
    }
  });

  it('runs exactly one reconnect loop when the connection errors and ends while being set up', async () => {
    await waitFor(() => (bus.isHealthy ? true : undefined), 15000);
    const okBefore = await counter(app, 'mcp_bus_reconnects_total', { result: 'ok' });
    // Cut the live connection; the reconnect attempt then goes silent at its first LISTEN...
    proxy.stallAtNextQuery(isListener);
    expect(proxy.cut(isListener)).toBe(1);
    await waitFor(() => (proxy.stalledCount(isListener) > 0 ? true : undefined), 10000);
    // ...and is cut there: an error and an end event together, while the setup query is pending.
    proxy.stallAtNextQuery(undefined);
    proxy.cut(isListener);
    await waitFor(() => (bus.isConnected ? true : undefined), 15000);
    // Give a second loop, if there were one, time to connect too (backoff is at most a few hundred ms here).
    await new Promise((r) => setTimeout(r, 2500));
    expect(proxy.count(isListener)).toBe(1);
    expect(await backends(db, bus.applicationName)).toHaveLength(1);
    expect((await counter(app, 'mcp_bus_reconnects_total', { result: 'ok' })) - okBefore).toBe(1);
    const got: unknown[] = [];
    const off = bus.subscribe('loop_chan', (p) => got.push(p.id));
    await bus.listening();
    try {
      await heardFromPeer('loop_chan', got);
    } finally {
      off();
    }
  });

  it('counts one reconnect for a live connection that reports both an error and its end', async () => {
    await waitFor(() => (bus.isHealthy ? true : undefined), 15000);
    const okBefore = await counter(app, 'mcp_bus_reconnects_total', { result: 'ok' });
    const [pid] = await backends(db, bus.applicationName);
    await withClient(db.url, (c) => c.query('SELECT pg_terminate_backend($1)', [pid]));
    await waitFor(() => (bus.isConnected ? undefined : true));
    await waitFor(() => (bus.isHealthy ? true : undefined), 15000);
    await new Promise((r) => setTimeout(r, 2500));
    expect(await backends(db, bus.applicationName)).toHaveLength(1);
    expect((await counter(app, 'mcp_bus_reconnects_total', { result: 'ok' })) - okBefore).toBe(1);
  });
});
