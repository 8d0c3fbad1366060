import type { INestApplication } from '@nestjs/common';
import { SignJWT, type JWTPayload } from 'jose';
import request from 'supertest';
import { runCli } from '../../src/cli/cli.js';
import {
  challengeParams,
  METADATA,
  METRICS_TOKEN,
  ProbeModule,
  PROXY_SECRET,
  RESOURCE,
} from '../support/auth-probe.js';
import { TestIssuer, unsignedToken } from '../support/oidc-issuer.js';
import { rawRequest } from '../support/raw-http.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

async function cliCreateKey(
  dbUrl: string,
  name: string,
  scopes: string,
): Promise<{ id: string; key: string }> {
  const out: string[] = [];
  const code = await runCli(
    ['apikey', 'create', '--name', name, '--scopes', scopes],
    { DATABASE_URL: dbUrl },
    {
      out: (l) => out.push(l),
      err: () => undefined,
    },
  );
  expect(code).toBe(0);
  const field = (f: string): string => (out.find((l) => l.startsWith(`${f}: `)) ?? '').slice(f.length + 2);
  return { id: field('id'), key: field('key') };
}

describe('authentication (real AppModule over HTTP, own OIDC issuer on loopback)', () => {
  let db: TestDatabase;
  let issuer: TestIssuer;
  let app: INestApplication;
  const http = () => request(app.getHttpServer());

  async function failureCount(reason: string): Promise<number> {
    const res = await http().get('/metrics').set('authorization', `Bearer ${METRICS_TOKEN}`).expect(200);
    const m = new RegExp(`^mcp_auth_failures_total\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(res.text);
    if (!m) throw new Error(`no mcp_auth_failures_total sample for ${reason}`);
    return Number(m[1]);
  }

  /** Sends the request and checks a 401 invalid_token challenge with the given metric reason. */
  async function expectRefused(token: string, reason: string): Promise<Record<string, string>> {
    const before = await failureCount(reason);
    const res = await http().get('/probe').set('authorization', `Bearer ${token}`).expect(401);
    const params = challengeParams(res.headers['www-authenticate']);
    expect(params.resource_metadata).toBe(METADATA);
    expect(params.scope).toBe('tasks:read tasks:write');
    expect(params.error).toBe('invalid_token');
    expect(res.body.error).toBe('invalid_token');
    expect(await failureCount(reason)).toBe(before + 1);
    return params;
  }

  beforeAll(async () => {
    db = await createTestDatabase('auth');
    issuer = await TestIssuer.start(RESOURCE);
    app = await createTestApp(
      db.url,
      {
        AUTH_PROVIDERS: 'oidc,proxy,apikey',
        OIDC_ISSUER: issuer.issuer,
        MCP_RESOURCE_URL: RESOURCE,
        OIDC_CLOCK_SKEW_S: '5',
        OIDC_JWKS_COOLDOWN_MS: '1000',
        AUTH_PROXY_SECRET: PROXY_SECRET,
        AUTH_PROXY_SCOPES: 'tasks:read',
        AUTH_SCOPES_SUPPORTED: 'tasks:read,tasks:write,offline_access',
        METRICS_TOKEN,
      },
      [ProbeModule],
    );
  });
  afterAll(async () => {
    await app.close();
    await issuer.close();
    await db.drop();
  });

  describe('OIDC bearer tokens', () => {
    it('accepts a valid token and puts the principal on the request, found through discovery', async () => {
      const token = await issuer.sign(
        { scope: 'tasks:read tasks:write', name: 'Ada Lovelace', email: 'ada@example.test', groups: ['eng'] },
        { subject: 'ada' },
      );
      const res = await http().get('/probe').set('authorization', `Bearer ${token}`).expect(200);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^oidc:[A-Za-z0-9_-]{22}$/),
        provider: 'oidc',
        subject: 'ada',
        issuer: issuer.issuer,
        name: 'Ada Lovelace',
        email: 'ada@example.test',
        scopes: ['tasks:read', 'tasks:write'],
        groups: ['eng'],
        // The token's exp (300 s ahead), in epoch ms: streams opened with it close once it has passed.
        expiresAt: JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).exp * 1000,
      });
      expect(issuer.discoveryFetches).toBe(1);
      const rows = await withClient(db.url, (c) =>
        c.query('SELECT provider, issuer, subject, display_name, email FROM principal WHERE id = $1', [
          res.body.id,
        ]),
      );
      expect(rows.rows).toEqual([
        {
          provider: 'oidc',
          issuer: issuer.issuer,
          subject: 'ada',
          display_name: 'Ada Lovelace',
          email: 'ada@example.test',
        },
      ]);
    });

    it('reads scopes from an scp array and keeps the same principal for a refreshed token', async () => {
      const first = await http()
        .get('/probe')
        .set('authorization', `Bearer ${await issuer.sign({ scp: ['tasks:read'] }, { subject: 'bob' })}`)
        .expect(200);
      const second = await http()
        .get('/probe')
        .set(
          'authorization',
          `Bearer ${await issuer.sign({ scp: ['tasks:read', 'x'] }, { subject: 'bob', expiresIn: 900 })}`,
        )
        .expect(200);
      expect(first.body.scopes).toEqual(['tasks:read']);
      expect(second.body.scopes).toEqual(['tasks:read', 'x']);
      expect(second.body.id).toBe(first.body.id);
      const rows = await withClient(db.url, (c) => c.query(`SELECT id FROM principal WHERE subject = 'bob'`));
      expect(rows.rows).toEqual([{ id: first.body.id }]);
      expect(issuer.discoveryFetches).toBe(1);
    });

    it('answers a request without credentials with 401 and a challenge without an error code', async () => {
      const before = await failureCount('missing');
      const res = await http().get('/probe').expect(401);
      expect(res.headers['www-authenticate']).toBe(
        `Bearer resource_metadata="${METADATA}", scope="tasks:read tasks:write"`,
      );
      expect(res.body).toEqual({
        statusCode: 401,
        error: 'unauthorized',
        message: 'Authentication required',
      });
      expect(await failureCount('missing')).toBe(before + 1);
    });

    it('refuses an expired token', async () => {
      const params = await expectRefused(await issuer.sign({}, { expiresIn: -60 }), 'expired');
      expect(params.error_description).toBe('The access token expired');
    });

    it('allows the configured clock skew on exp', async () => {
      await http()
        .get('/probe')
        .set('authorization', `Bearer ${await issuer.sign({}, { expiresIn: -2 })}`)
        .expect(200);
    });

    it('refuses a token that is not valid yet', async () => {
      await expectRefused(await issuer.sign({}, { notBefore: 120 }), 'not_yet_valid');
    });

    it('refuses a token for another audience', async () => {
      await expectRefused(await issuer.sign({}, { audience: 'https://other.example.test/mcp' }), 'audience');
    });

    it('refuses a token from another issuer, even one signed with a trusted key', async () => {
      await expectRefused(await issuer.sign({}, { issuer: 'https://evil.example.test' }), 'issuer');
    });

    it('refuses a token whose signature does not verify', async () => {
      const forger = await TestIssuer.start(RESOURCE);
      try {
        // Same kid and claims as a genuine token, but signed with the forger's key.
        const forged = await forger.sign({}, { issuer: issuer.issuer });
        await expectRefused(forged, 'signature');
        const genuine = await issuer.sign({});
        const [h, p] = genuine.split('.');
        await expectRefused(`${h}.${p}.${forged.split('.')[2]}`, 'signature');
      } finally {
        await forger.close();
      }
    });

    it('refuses alg none', async () => {
      const now = Math.floor(Date.now() / 1000);
      const token = unsignedToken({
        iss: issuer.issuer,
        aud: RESOURCE,
        sub: 'ada',
        exp: now + 300,
        iat: now,
      });
      await expectRefused(token, 'algorithm');
    });

    it('refuses HS256 signed with the public key as the HMAC secret', async () => {
      const pem = await issuer.publicKeyPem();
      const token = await issuer
        .claims({}, { subject: 'ada' })
        .setProtectedHeader({ alg: 'HS256', kid: 'key-1' })
        .sign(new TextEncoder().encode(pem));
      await expectRefused(token, 'algorithm');
    });

    it('refuses a token that is not a JWT', async () => {
      await expectRefused('not-a-jwt', 'malformed');
      await expectRefused('a.b.c', 'malformed');
    });

    it('follows key rotation: a new kid is fetched once the cooldown has passed; unknown kids are rate limited', async () => {
      await issuer.addKey('key-2');
      await new Promise((r) => setTimeout(r, 1100));
      const fetchesBefore = issuer.jwksFetches;
      const res = await http()
        .get('/probe')
        .set('authorization', `Bearer ${await issuer.sign({}, { kid: 'key-2', subject: 'rotated' })}`)
        .expect(200);
      expect(res.body.subject).toBe('rotated');
      expect(issuer.jwksFetches).toBe(fetchesBefore + 1);

      // Tokens with kids the issuer never published: refused, and they cannot force a JWKS fetch each.
      const unknown: string[] = [];
      for (let i = 0; i < 5; i++) {
        await issuer.addKey(`ghost-${i}`, false);
        unknown.push(await issuer.sign({}, { kid: `ghost-${i}` }));
      }
      const afterRotation = issuer.jwksFetches;
      for (const token of unknown) await expectRefused(token, 'unknown_key');
      expect(issuer.jwksFetches - afterRotation).toBeLessThanOrEqual(1);
    });

    it('never accepts a token in the query string', async () => {
      const token = await issuer.sign({});
      await http().get(`/probe?access_token=${token}`).expect(401);
    });

    /** A genuine signature over claims whose `sub` is whatever the test says (the issuer sets a string one). */
    async function signWithSub(sub: unknown, claims: Record<string, unknown> = {}): Promise<string> {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ ...claims, sub } as JWTPayload)
        .setProtectedHeader({ alg: 'RS256', kid: 'key-1', typ: 'at+jwt' })
        .setIssuer(issuer.issuer)
        .setAudience(RESOURCE)
        .setIssuedAt(now)
        .setExpirationTime(now + 300)
        .sign(issuer.key().privateKey);
    }

    it('refuses a sub that is not a non-empty string, so no two subjects can share a principal', async () => {
      for (const sub of ['', '   ', 42, 0, true, { id: 'ada' }, { id: 'bob' }, ['ada'], 'x'.repeat(1025)]) {
        const params = await expectRefused(await signWithSub(sub), 'malformed');
        expect({ sub, description: params.error_description }).toEqual({
          sub,
          description: 'The access token is malformed',
        });
      }
      const rows = await withClient(db.url, (c) =>
        c.query(
          `SELECT subject FROM principal WHERE subject IN ('', '42', '0', 'true', '[object Object]', 'ada ')`,
        ),
      );
      expect(rows.rows).toEqual([]);
    });

    it('reads a group claim as whole names and refuses one that holds anything else', async () => {
      const ok = await http()
        .get('/probe')
        .set(
          'authorization',
          `Bearer ${await signWithSub('gail', { groups: 'Domain Admins', roles: ['r 1'] })}`,
        )
        .expect(200);
      expect(ok.body.groups).toEqual(['Domain Admins', 'r 1']);
      for (const groups of [[{ name: 'eng' }], ['eng', ''], 7, { eng: true }, [' ']]) {
        await expectRefused(await signWithSub('gail', { groups }), 'malformed');
        await expectRefused(await signWithSub('gail', { roles: groups }), 'malformed');
      }
    });
  });

  describe('SSO proxy headers', () => {
    it('trusts the proxy user, email and groups when the shared secret is present', async () => {
      const res = await http()
        .get('/probe')
        .set('x-forwarded-user', 'carol')
        .set('x-forwarded-email', 'carol@example.test')
        .set('x-forwarded-groups', 'eng, ops')
        .set('x-auth-proxy-secret', PROXY_SECRET)
        .expect(200);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^proxy:/),
        provider: 'proxy',
        subject: 'carol',
        name: 'carol',
        email: 'carol@example.test',
        scopes: ['tasks:read'],
        groups: ['eng', 'ops'],
      });
    });

    it('refuses proxy headers without the secret or with a wrong one', async () => {
      const before = await failureCount('untrusted_proxy');
      for (const secret of [undefined, 'wrong-secret-0123456789abcdef', `${PROXY_SECRET}x`]) {
        const req = http().get('/probe').set('x-forwarded-user', 'mallory');
        if (secret) void req.set('x-auth-proxy-secret', secret);
        const res = await req.expect(401);
        expect(challengeParams(res.headers['www-authenticate'])).toEqual({
          resource_metadata: METADATA,
          scope: 'tasks:read tasks:write',
        });
      }
      expect(await failureCount('untrusted_proxy')).toBe(before + 3);
    });

    it('refuses a repeated or blank user header instead of reading the joined value as one user', async () => {
      const before = await failureCount('malformed');
      // Two header lines (supertest would send one): Node hands the server "alice, bob".
      const origin = await loopbackUrl(app);
      const res = await rawRequest(origin, '/probe', 'GET', {
        'x-forwarded-user': ['alice', 'bob'],
        'x-auth-proxy-secret': PROXY_SECRET,
      });
      expect(res.status).toBe(401);
      expect(JSON.parse(res.text).message).toBe('The access token is malformed');
      expect(await failureCount('malformed')).toBe(before + 1);
      const rows = await withClient(db.url, (c) =>
        c.query(`SELECT subject FROM principal WHERE subject LIKE 'alice%'`),
      );
      expect(rows.rows).toEqual([]);
      // Blank groups between commas are no groups; a blank user is no credential at all.
      const groups = await http()
        .get('/probe')
        .set('x-forwarded-user', 'alice')
        .set('x-forwarded-groups', ' , eng,, ')
        .set('x-auth-proxy-secret', PROXY_SECRET)
        .expect(200);
      expect(groups.body.groups).toEqual(['eng']);
      await http()
        .get('/probe')
        .set('x-forwarded-user', '  ')
        .set('x-auth-proxy-secret', PROXY_SECRET)
        .expect(401);
    });
  });

  describe('API keys', () => {
    it('creates a key with the CLI, authenticates with it, lists it and refuses it once revoked', async () => {
      const { id, key } = await cliCreateKey(db.url, 'ci-bot', 'tasks:read,tasks:write');
      expect(key).toMatch(new RegExp(`^mcpk_${id}_[A-Za-z0-9_-]{43}$`));
      const stored = await withClient(db.url, (c) => c.query('SELECT * FROM api_key WHERE id = $1', [id]));
      expect(JSON.stringify(stored.rows)).not.toContain(key.slice(`mcpk_${id}_`.length));

      const viaBearer = await http().get('/probe').set('authorization', `Bearer ${key}`).expect(200);
      expect(viaBearer.body).toEqual({
        id: `apikey:${id}`,
        provider: 'apikey',
        subject: id,
        name: 'ci-bot',
        scopes: ['tasks:read', 'tasks:write'],
        groups: [],
      });
      const viaHeader = await http().get('/probe').set('x-api-key', key).expect(200);
      expect(viaHeader.body.id).toBe(`apikey:${id}`);

      const listed: string[] = [];
      expect(
        await runCli(
          ['apikey', 'list'],
          { DATABASE_URL: db.url },
          { out: (l) => listed.push(l), err: () => undefined },
        ),
      ).toBe(0);
      expect(
        listed.some((l) => l.startsWith(`${id}\tci-bot\ttasks:read,tasks:write\t`) && l.endsWith('\t-')),
      ).toBe(true);
      expect(listed.join('\n')).not.toContain(key);

      expect(
        await runCli(
          ['apikey', 'revoke', id],
          { DATABASE_URL: db.url },
          { out: () => undefined, err: () => undefined },
        ),
      ).toBe(0);
      const params = await expectRefused(key, 'revoked_key');
      expect(params.error_description).toBe('The API key was revoked');
      expect(
        await runCli(
          ['apikey', 'revoke', id],
          { DATABASE_URL: db.url },
          { out: () => undefined, err: () => undefined },
        ),
      ).toBe(3); // already revoked: nothing to do
    });

    it('refuses an unknown key and a known id with the wrong secret', async () => {
      const { id } = await cliCreateKey(db.url, 'other', '');
      await expectRefused(`mcpk_${id}_${'A'.repeat(43)}`, 'unknown_key');
      await expectRefused(`mcpk_abcdefghijkl_${'B'.repeat(43)}`, 'unknown_key');
      const res = await http().get('/probe').set('x-api-key', 'garbage').expect(401);
      expect(challengeParams(res.headers['www-authenticate']).error).toBe('invalid_token');
    });
  });

  describe('scope challenges', () => {
    it('answers 403 insufficient_scope naming the scopes the operation needs', async () => {
      const token = await issuer.sign({ scope: 'tasks:read' });
      const res = await http().get('/probe/admin').set('authorization', `Bearer ${token}`).expect(403);
      expect(challengeParams(res.headers['www-authenticate'])).toEqual({
        resource_metadata: METADATA,
        scope: 'admin:write',
        error: 'insufficient_scope',
        error_description: 'This operation needs the scopes: admin:write',
      });
      const ok = await issuer.sign({ scope: 'tasks:read admin:write' });
      await http().get('/probe/admin').set('authorization', `Bearer ${ok}`).expect(200);
    });
  });

  describe('open and protected operational endpoints', () => {
    it('serves the RFC 9728 documents without authentication', async () => {
      for (const path of [
        '/.well-known/oauth-protected-resource',
        '/.well-known/oauth-protected-resource/mcp',
      ]) {
        const res = await http().get(path).expect(200);
        expect(res.body).toEqual({
          resource: RESOURCE,
          authorization_servers: [issuer.issuer],
          scopes_supported: ['tasks:read', 'tasks:write'],
          bearer_methods_supported: ['header'],
          resource_name: 'mcp-task-server',
        });
        expect(res.headers['access-control-allow-origin']).toBe('*');
      }
    });

    it('keeps health open and requires METRICS_TOKEN on /metrics', async () => {
      await http().get('/health/live').expect(200);
      await http().get('/health/ready').expect(200);
      const none = await http().get('/metrics').expect(401);
      expect(none.headers['www-authenticate']).toBe('Bearer realm="metrics"');
      await http().get('/metrics').set('authorization', 'Bearer wrong').expect(401);
      await http().get('/metrics').set('authorization', `Bearer ${METRICS_TOKEN}x`).expect(401);
      const ok = await http().get('/metrics').set('authorization', `Bearer ${METRICS_TOKEN}`).expect(200);
      expect(ok.text).toMatch(/^mcp_auth_failures_total\{reason="signature"\} \d+$/m);
    });
  });

  describe('a second deployment: another issuer, explicit JWKS URI, required scopes', () => {
    let other: TestIssuer;
    let app2: INestApplication;

    beforeAll(async () => {
      other = await TestIssuer.start(RESOURCE);
      app2 = await createTestApp(
        db.url,
        {
          AUTH_PROVIDERS: 'oidc',
          OIDC_ISSUER: other.issuer,
          OIDC_JWKS_URI: other.jwksUri,
          MCP_RESOURCE_URL: RESOURCE,
          AUTH_REQUIRED_SCOPES: 'tasks:read',
        },
        [ProbeModule],
      );
    });
    afterAll(async () => {
      await app2.close();
      await other.close();
    });

    it('gives the same subject under another issuer another principal', async () => {
      const a = await http()
        .get('/probe')
        .set('authorization', `Bearer ${await issuer.sign({}, { subject: 'dana' })}`)
        .expect(200);
      const b = await request(app2.getHttpServer())
        .get('/probe')
        .set('authorization', `Bearer ${await other.sign({ scope: 'tasks:read' }, { subject: 'dana' })}`)
        .expect(200);
      expect(b.body.id).not.toBe(a.body.id);
      expect(b.body.issuer).toBe(other.issuer);
      const rows = await withClient(db.url, (c) =>
        c.query(`SELECT id, issuer FROM principal WHERE subject = 'dana' ORDER BY issuer`),
      );
      expect(rows.rows).toHaveLength(2);
      expect(other.discoveryFetches).toBe(0);
      // Each app keeps its own strategies: the first still refuses the second issuer's tokens (its key-1 is
      // not the first issuer's key-1, so the signature is checked, and fails, before the issuer claim).
      await expectRefused(await other.sign({ scope: 'tasks:read' }, { subject: 'dana' }), 'signature');
    });

    it('answers 403 insufficient_scope when AUTH_REQUIRED_SCOPES is not held', async () => {
      const res = await request(app2.getHttpServer())
        .get('/probe')
        .set('authorization', `Bearer ${await other.sign({ scope: 'something:else' })}`)
        .expect(403);
      expect(challengeParams(res.headers['www-authenticate'])).toMatchObject({
        scope: 'tasks:read',
        error: 'insufficient_scope',
      });
      const missing = await request(app2.getHttpServer()).get('/probe').expect(401);
      expect(challengeParams(missing.headers['www-authenticate']).scope).toBe('tasks:read');
    });
  });

  it('leaves typ unchecked when OIDC_REQUIRED_TYP is unset (this deployment)', async () => {
    await http()
      .get('/probe')
      .set('authorization', `Bearer ${await issuer.sign({}, { typ: 'JWT' })}`)
      .expect(200);
  });
});
