import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { challengeParams, METRICS_TOKEN, ProbeModule, RESOURCE } from '../support/auth-probe.js';
import { TestIssuer } from '../support/oidc-issuer.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/** Deployments other than auth.e2e-spec's: access tokens only (RFC 9068), an unreachable IdP, no providers. */
describe('authentication in other deployments (real AppModule over HTTP, own OIDC issuer on loopback)', () => {
  let db: TestDatabase;
  let issuer: TestIssuer;

  beforeAll(async () => {
    db = await createTestDatabase('auth_deployments');
    issuer = await TestIssuer.start(RESOURCE);
  });
  afterAll(async () => {
    await issuer.close();
    await db.drop();
  });

  describe('OIDC_REQUIRED_TYP=at+jwt (RFC 9068 access tokens only)', () => {
    let app3: INestApplication;
    const http3 = () => request(app3.getHttpServer());

    beforeAll(async () => {
      app3 = await createTestApp(
        db.url,
        {
          AUTH_PROVIDERS: 'oidc',
          OIDC_ISSUER: issuer.issuer,
          MCP_RESOURCE_URL: RESOURCE,
          OIDC_REQUIRED_TYP: 'at+jwt',
          METRICS_TOKEN,
        },
        [ProbeModule],
      );
    });
    afterAll(async () => {
      await app3.close();
    });

    it('accepts at+jwt in any case, with or without the application/ prefix', async () => {
      for (const typ of ['at+jwt', 'AT+JWT', 'application/at+jwt', 'Application/AT+JWT']) {
        await http3()
          .get('/probe')
          .set('authorization', `Bearer ${await issuer.sign({}, { typ })}`)
          .expect(200);
      }
    });

    it('refuses an ID token (typ JWT) and a token without typ with 401 invalid_token', async () => {
      for (const typ of ['JWT', 'application/jwt', 'id_token+jwt', null]) {
        const res = await http3()
          .get('/probe')
          .set('authorization', `Bearer ${await issuer.sign({}, { typ })}`)
          .expect(401);
        const params = challengeParams(res.headers['www-authenticate']);
        expect(params.error).toBe('invalid_token');
        expect(params.error_description).toBe('The token is not an access token of the required type');
      }
      const metrics = await http3().get('/metrics').set('authorization', `Bearer ${METRICS_TOKEN}`);
      expect(metrics.text).toMatch(/^mcp_auth_failures_total\{reason="token_type"\} [1-9]/m);
    });
  });

  describe('when the identity provider cannot be reached', () => {
    it('answers 503 with Retry-After, not 401, and counts no authentication failure', async () => {
      const down = await createTestApp(
        db.url,
        {
          AUTH_PROVIDERS: 'oidc',
          OIDC_ISSUER: issuer.issuer,
          // Port 1 on loopback: nothing listens there.
          OIDC_JWKS_URI: 'http://127.0.0.1:1/jwks',
          MCP_RESOURCE_URL: RESOURCE,
        },
        [ProbeModule],
      );
      try {
        const res = await request(down.getHttpServer())
          .get('/probe')
          .set('authorization', `Bearer ${await issuer.sign({})}`)
          .expect(503);
        expect(res.headers['retry-after']).toBe('5');
        expect(res.headers['www-authenticate']).toBeUndefined();
        const metrics = await request(down.getHttpServer()).get('/metrics').expect(200);
        expect(metrics.text).not.toMatch(/^mcp_auth_failures_total\{reason="[a-z_]+"\} [1-9]/m);
      } finally {
        await down.close();
      }
    });
  });

  describe('without providers (development)', () => {
    it('runs every request as the anonymous principal and leaves /metrics open without METRICS_TOKEN', async () => {
      const dev = await createTestApp(db.url, {}, [ProbeModule]);
      try {
        const res = await request(dev.getHttpServer()).get('/probe').expect(200);
        expect(res.body).toEqual({
          id: 'anonymous:dev',
          provider: 'anonymous',
          subject: 'dev',
          name: 'Anonymous developer',
          scopes: [],
          groups: [],
        });
        await request(dev.getHttpServer()).get('/probe/admin').expect(200);
        await request(dev.getHttpServer()).get('/metrics').expect(200);
        const doc = await request(dev.getHttpServer())
          .get('/.well-known/oauth-protected-resource/mcp')
          .expect(200);
        expect(doc.body.resource).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
        expect(doc.body.authorization_servers).toBeUndefined();
      } finally {
        await dev.close();
      }
    });
  });
});
