import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { HealthService } from '../health/health.service.js';
import { createTestApp } from '../../test/support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
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
      await a
        .get(DataSource)
        .transaction(async (m) => {
          await bus.publish('tx_chan', { id: 'rolled-back' }, m);
          throw new Error('abort');
        })
        .catch(() => undefined);
      await a.get(DataSource).transaction(async (m) => {
        await bus.publish('tx_chan', { id: 'committed' }, m);
        await new Promise((r) => setTimeout(r, 100));
        expect(got).toEqual([]); // not before commit
      });
      await waitFor(() => (got.length > 0 ? got : undefined));
      await new Promise((r) => setTimeout(r, 100));
      expect(got).toEqual(['committed']);
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
           WHERE datname = current_database() AND application_name = 'mcp-task-server-listen'`,
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
