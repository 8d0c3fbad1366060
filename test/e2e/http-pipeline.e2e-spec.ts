import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { LifecycleService } from '../../src/lifecycle/lifecycle.service.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

/** Minimal Prometheus text-format check: every sample line is `name{labels} value`. */
function parsePrometheus(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})?) (-?[0-9.eE+-]+|NaN|[+-]Inf)$/.exec(line);
    if (!m) throw new Error(`not Prometheus text: ${line}`);
    samples.set(m[1], Number(m[3]));
  }
  return samples;
}

describe('HTTP pipeline (real AppModule over HTTP)', () => {
  let db: TestDatabase;
  let app: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase('http');
    app = await createTestApp(db.url);
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('answers liveness without consulting anything', async () => {
    const res = await request(app.getHttpServer()).get('/health/live').expect(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  it('reports ready with the database, migration and drain checks', async () => {
    const res = await request(app.getHttpServer()).get('/health/ready').expect(200);
    expect(res.body).toEqual({
      status: 'ok',
      checks: {
        shutdown: { status: 'up' },
        database: { status: 'up' },
        migrations: { status: 'up' },
        database_faults: { status: 'up' },
        listener: { status: 'up' },
      },
      // INSTANCE_ROLE, default all (operations.md, Roles).
      role: 'all',
    });
  });

  it('registers the instance with a heartbeat row', async () => {
    const rows = await withClient(db.url, (c) => c.query('SELECT pid, stopped_at FROM service_instance'));
    expect(rows.rows).toEqual([{ pid: process.pid, stopped_at: null }]);
  });

  it('echoes a well-formed x-request-id and replaces a malformed one', async () => {
    const ok = await request(app.getHttpServer())
      .get('/health/live')
      .set('x-request-id', 'abc-123')
      .expect(200);
    expect(ok.headers['x-request-id']).toBe('abc-123');
    const bad = await request(app.getHttpServer())
      .get('/health/live')
      .set('x-request-id', 'has spaces\tand tabs');
    expect(bad.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const none = await request(app.getHttpServer()).get('/health/live');
    expect(none.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('answers an oversized body with 413 and JSON', async () => {
    const big = JSON.stringify({ blob: 'x'.repeat(10 * 1024 * 1024) });
    const res = await request(app.getHttpServer())
      .post('/anything')
      .set('content-type', 'application/json')
      .send(big)
      .expect(413);
    expect(res.body).toEqual({ statusCode: 413, message: 'Request body exceeds the 4mb limit' });
    await request(app.getHttpServer()).get('/health/live').expect(200);
  });

  it('answers malformed JSON with 400: plain JSON elsewhere, a JSON-RPC parse error on /mcp', async () => {
    const plain = await request(app.getHttpServer())
      .post('/anything')
      .set('content-type', 'application/json')
      .send('{"a":')
      .expect(400);
    expect(plain.body).toEqual({ statusCode: 400, message: 'Parse error: malformed JSON' });
    const rpc = await request(app.getHttpServer())
      .post('/mcp')
      .set('content-type', 'application/json')
      .send('{"jsonrpc":')
      .expect(400);
    expect(rpc.body).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32700, message: 'Parse error: malformed JSON' },
    });
  });

  it('answers unknown routes with a JSON 404 and never exposes internals', async () => {
    const res = await request(app.getHttpServer()).get('/nope').expect(404);
    expect(res.body.statusCode).toBe(404);
    expect(JSON.stringify(res.body)).not.toMatch(/node_modules|at .*\.js/);
    expect(res.headers['x-powered-by']).toBeUndefined();
  });

  it('keeps CORS off unless configured', async () => {
    const res = await request(app.getHttpServer()).get('/health/live').set('Origin', 'https://evil.example');
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('serves Prometheus text with build info and a route-template request histogram', async () => {
    await request(app.getHttpServer()).get('/health/live').expect(200);
    await request(app.getHttpServer()).get('/does/not/exist/12345').expect(404);
    const res = await request(app.getHttpServer()).get('/metrics').expect(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    const samples = parsePrometheus(res.text);
    const build = [...samples.keys()].find((k) => k.startsWith('mcp_build_info{'));
    expect(build).toMatch(/version="\d+\.\d+\.\d+"/);
    expect(samples.get(build!)).toBe(1);
    expect(
      samples.get(
        'http_request_duration_seconds_count{method="GET",route="/health/live",status_class="2xx"}',
      ),
    ).toBeGreaterThanOrEqual(1);
    // Unmatched paths collapse into one label value: no unbounded cardinality from URLs.
    expect(
      samples.get('http_request_duration_seconds_count{method="GET",route="unmatched",status_class="4xx"}'),
    ).toBeGreaterThanOrEqual(1);
    expect(res.text).not.toContain('12345');
    expect(samples.has('process_cpu_seconds_total')).toBe(true);
  });

  it('turns readiness to 503 and refuses MCP requests once draining', async () => {
    const other = await createTestApp(db.url);
    try {
      other.get(LifecycleService).beginDrain();
      const ready = await request(other.getHttpServer()).get('/health/ready').expect(503);
      expect(ready.body.status).toBe('error');
      expect(ready.body.checks.shutdown).toEqual({ status: 'down', reason: 'shutting down' });
      const mcp = await request(other.getHttpServer())
        .post('/mcp')
        .set('content-type', 'application/json')
        .send({ jsonrpc: '2.0', id: 1, method: 'ping' })
        .expect(503);
      expect(mcp.body.error.code).toBe(-32000);
      expect(mcp.headers['retry-after']).toBe('5');
      await request(other.getHttpServer()).get('/health/live').expect(200);
    } finally {
      await other.close();
    }
  });
});

describe('CORS when configured', () => {
  let db: TestDatabase;
  let app: INestApplication;
  beforeAll(async () => {
    db = await createTestDatabase('cors');
    app = await createTestApp(db.url, { CORS_ORIGINS: 'https://app.example' });
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('allows only the listed origin', async () => {
    const ok = await request(app.getHttpServer()).get('/health/live').set('Origin', 'https://app.example');
    expect(ok.headers['access-control-allow-origin']).toBe('https://app.example');
    const no = await request(app.getHttpServer()).get('/health/live').set('Origin', 'https://evil.example');
    expect(no.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('readiness when the database is gone', () => {
  it('answers 503 naming the database check, while liveness stays 200', async () => {
    const db = await createTestDatabase('gone');
    const app = await createTestApp(db.url, { HEALTH_DB_TIMEOUT_MS: '1000' });
    try {
      await db.drop(); // WITH (FORCE) terminates the pool's connections
      const res = await request(app.getHttpServer()).get('/health/ready').expect(503);
      expect(res.body.checks.database).toEqual({ status: 'down', reason: 'unavailable' });
      // Driver messages name the database and the server; the public body carries fixed reasons only.
      expect(res.text).not.toContain(db.name);
      expect(res.text).not.toMatch(/terminat|does not exist|ECONN/i);
      await request(app.getHttpServer()).get('/health/live').expect(200);
    } finally {
      await app.close().catch(() => undefined);
    }
  });
});
