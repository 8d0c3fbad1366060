import type { INestApplication } from '@nestjs/common';
import pg from 'pg';
import request from 'supertest';
import { HealthService, READINESS_CACHE_MS } from '../../src/health/health.service.js';
import { LifecycleService } from '../../src/lifecycle/lifecycle.service.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(condition: () => boolean, what: string, timeoutMs = 10000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

describe('/health/ready (real AppModule, real PostgreSQL)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  const http = () => request(app.getHttpServer());

  beforeAll(async () => {
    db = await createTestDatabase('health');
    app = await createTestApp(db.url, { HEALTH_DB_TIMEOUT_MS: '300' });
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('serves concurrent probes from one shared check, and checks again once the cache is stale', async () => {
    // An app of its own with a check timeout far above the time 20 requests take to arrive on a loaded
    // machine: with this suite's 300 ms one, the blocked check timed out before the last probe was in.
    const own = await createTestApp(db.url, { HEALTH_DB_TIMEOUT_MS: '5000' });
    try {
      const ownHttp = () => request(own.getHttpServer());
      let calls = 0;
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      own.get(HealthService).register('counted', async () => {
        calls++;
        await gate;
        return { status: 'up' };
      });
      await sleep(READINESS_CACHE_MS + 100); // whatever earlier requests cached is stale now
      const lifecycle = own.get(LifecycleService);
      const probes = Array.from({ length: 20 }, () => ownHttp().get('/health/ready'));
      const answers = Promise.all(probes.map((p) => p.then((r) => r)));
      await until(() => lifecycle.inFlightRequests >= 20 && calls === 1, 'all probes in flight');
      release();
      for (const res of await answers) {
        expect(res.status).toBe(200);
        expect(res.body.checks.counted).toEqual({ status: 'up' });
      }
      expect(calls).toBe(1);

      await sleep(READINESS_CACHE_MS + 100);
      await ownHttp().get('/health/ready').expect(200);
      expect(calls).toBe(2);
    } finally {
      await own.close();
    }
  });

  it('cancels a blocked database probe on the server and answers 503 with a fixed reason', async () => {
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE typeorm_migrations IN ACCESS EXCLUSIVE MODE');
      await sleep(READINESS_CACHE_MS + 100);
      const res = await http().get('/health/ready').expect(503);
      expect(res.body.checks.database).toEqual({ status: 'up' });
      expect(res.body.checks.migrations).toEqual({ status: 'down', reason: 'timeout' });
      expect(res.text).not.toMatch(/statement|lock|cancel/i);
      // PostgreSQL itself gave up: no statement of the app is left queued behind the lock.
      const waiting = await withClient(db.url, (c) =>
        c.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> $1`,
          [(holder as unknown as { processID: number }).processID],
        ),
      );
      expect(waiting.rows[0].n).toBe(0);
      // Liveness never consults the database.
      await http().get('/health/live').expect(200);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
    await sleep(READINESS_CACHE_MS + 100);
    await http().get('/health/ready').expect(200);
  });

  it('turns 503 at once when draining, whatever is cached', async () => {
    const other = await createTestApp(db.url);
    try {
      await request(other.getHttpServer()).get('/health/ready').expect(200);
      other.get(LifecycleService).beginDrain();
      const res = await request(other.getHttpServer()).get('/health/ready').expect(503);
      expect(res.body.checks.shutdown).toEqual({ status: 'down', reason: 'shutting down' });
    } finally {
      await other.close();
    }
  });
});
