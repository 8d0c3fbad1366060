import { Controller, Get, Logger, Module, Req, type INestApplication } from '@nestjs/common';
import type { Request } from 'express';
import { AppLogger } from '../../src/logging/app-logger.js';
import { ApiKeysService } from '../../src/principals/api-keys.service.js';
import { rpc } from '../support/mcp-http.js';
import { PROXY_SECRET } from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/** A careless handler: logs the credentials it was sent, as a library error message sometimes does. */
@Controller('probe')
class CarelessController {
  private readonly logger = new Logger('Careless');

  @Get()
  echo(@Req() req: Request): { ok: true } {
    this.logger.warn(`calling upstream with ${req.header('authorization')} via ${req.originalUrl}`);
    this.logger.error(`upstream failed for ${req.header('x-upstream-url')}`, new Error('boom').stack);
    return { ok: true };
  }
}

@Module({ controllers: [CarelessController] })
class CarelessModule {}

/**
 * What the production logger (pino JSON, LOG_LEVEL=verbose: everything) writes while the real app serves
 * requests that carry credentials: valid and invalid API keys, bearer tokens, a proxy secret, a token in a
 * query string. None of them may appear in the output; the correlation fields must.
 */
describe('log output keeps credentials out (real app, captured JSON logs)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let base: string;
  const lines: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('log_redaction');
    app = await createTestApp(
      db.url,
      {
        MCP_CONFORMANCE_FIXTURES: 'true',
        AUTH_PROVIDERS: 'apikey,proxy',
        AUTH_PROXY_SECRET: PROXY_SECRET,
        LOG_LEVEL: 'verbose',
      },
      [CarelessModule],
      { logger: new AppLogger({ json: true, level: 'verbose', write: (l) => lines.push(l) }) },
    );
    base = await loopbackUrl(app);
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('logs requests with request and principal ids, and none of the secrets they carried', async () => {
    const { key } = await app.get(ApiKeysService).create('log-test', []);
    const forged = `${key.slice(0, -6)}AAAAAA`;
    const bogusJwt = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlLXNlY3JldA';
    const wrongProxySecret = 'not-the-proxy-secret-but-long-enough';
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'logs', version: '1' } },
    };

    const ok = await rpc(`${base}/mcp`, init, { authorization: `Bearer ${key}` });
    expect(ok.status).toBe(200);
    expect((await rpc(`${base}/mcp`, init, { 'x-api-key': forged })).status).toBe(401);
    expect((await rpc(`${base}/mcp`, init, { authorization: `Bearer ${bogusJwt}` })).status).toBe(401);
    const proxied = await rpc(`${base}/mcp`, init, {
      'x-forwarded-user': 'mallory',
      'x-auth-proxy-secret': wrongProxySecret,
    });
    expect(proxied.status).toBe(401);
    await fetch(`${base}/mcp?access_token=${bogusJwt}&api_key=${key}`, { method: 'PUT' });
    await fetch(`${base}/nowhere?token=${key}`);

    const out = lines.join('\n');
    expect(lines.length).toBeGreaterThan(0);
    for (const secret of [key, forged, bogusJwt, wrongProxySecret, key.split('_')[2]]) {
      expect(out).not.toContain(secret);
    }
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const requestId = ok.headers.get('x-request-id');
    const access = parsed.find((l) => l.request_id === requestId && l.context === 'HTTP');
    expect(access).toMatchObject({ level: 'debug', principal_id: expect.stringMatching(/^apikey:/) });
  });

  it('redacts credentials that code logs by mistake, keeping the line and its request id', async () => {
    const token = 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJjYXJlbGVzcyJ9.bm90LWEtcmVhbC1zaWc';
    const dbPassword = 'pg-pass-Zq81';
    lines.length = 0;
    const res = await fetch(`${base}/probe?access_token=${token}`, {
      headers: {
        authorization: `Bearer ${token}`,
        'x-upstream-url': `postgres://svc:${dbPassword}@db.internal:5432/mcp`,
      },
    });
    expect(res.status).toBe(200);
    const out = lines.join('\n');
    expect(out).not.toContain(token);
    expect(out).not.toContain(dbPassword);
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const warned = parsed.find((l) => l.context === 'Careless' && l.level === 'warn');
    expect(warned).toMatchObject({
      msg: 'calling upstream with Bearer [REDACTED] via /probe?access_token=[REDACTED]',
      request_id: res.headers.get('x-request-id'),
    });
    const failed = parsed.find((l) => l.context === 'Careless' && l.level === 'error');
    expect(failed?.msg).toBe('upstream failed for postgres://svc:[REDACTED]@db.internal:5432/mcp');
    expect(failed?.stack).toEqual(expect.stringContaining('Error: boom'));
  });
});
