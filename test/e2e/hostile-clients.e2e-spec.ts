import type { INestApplication } from '@nestjs/common';
import { once } from 'node:events';
import { Agent, request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { LifecycleService } from '../../src/lifecycle/lifecycle.service.js';
import { modernCall, openSession, openStream, rpc, sessionHeaders } from '../support/mcp-http.js';
import { answerElicitationWithError, newSeries, scrapeSeries } from '../support/metric-series.js';
import { MCP_POST, rawRequest } from '../support/raw-http.js';
import { asUser, PROXY_SECRET } from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

/** Issue 19: what a hostile client can do with the edges of the HTTP pipeline (real AppModule, real HTTP). */

const PROXY = { AUTH_PROVIDERS: 'proxy', AUTH_PROXY_SECRET: PROXY_SECRET, MCP_CONFORMANCE_FIXTURES: 'true' };
const PING = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
/** Spellings of /mcp that Express routes to the MCP controller (case-insensitive, trailing slash ignored). */
const SPELLINGS = ['/MCP', '/Mcp', '/mCp', '/MCP/', '/mcp/', '/mcp?x=1', '/MCP/?x=1'];

const originOf = async (app: INestApplication) => await loopbackUrl(app);

describe('hostile clients at the HTTP edge', () => {
  let db: TestDatabase;
  const apps: INestApplication[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('hostile');
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await db?.drop();
  });

  async function start(env: Record<string, string>): Promise<string> {
    const app = await createTestApp(db.url, { ...PROXY, ...env });
    apps.push(app);
    return originOf(app);
  }

  it('every spelling the router serves as /mcp is routed to the MCP endpoint', async () => {
    const origin = await start({});
    for (const path of SPELLINGS) {
      const res = await rawRequest(origin, path, 'POST', MCP_POST, PING);
      // Without credentials: the MCP endpoint's own 401 challenge, not the router's 404.
      expect({ path, status: res.status }).toEqual({ path, status: 401 });
      expect(res.headers['www-authenticate']).toMatch(/^Bearer /);
    }
  });

  it('the per-address rate limit applies to every spelling of /mcp', async () => {
    const origin = await start({ RATE_LIMIT_ADDRESS_RPS: '1', RATE_LIMIT_ADDRESS_BURST: '2' });
    for (const path of SPELLINGS) {
      // Empty the bucket on the canonical path, then the spelling must meet the same empty bucket.
      let canonical;
      do canonical = await rawRequest(origin, '/mcp', 'POST', MCP_POST, PING);
      while (canonical.status !== 429);
      const res = await rawRequest(origin, path, 'POST', MCP_POST, PING);
      expect({ path, status: res.status }).toEqual({ path, status: 429 });
      expect(JSON.parse(res.text).error.data).toMatchObject({ quota: 'address_rate' });
    }
  });

  it('a draining instance refuses every spelling of /mcp with 503', async () => {
    const app = await createTestApp(db.url, PROXY);
    apps.push(app);
    const origin = await originOf(app);
    app.get(LifecycleService).beginDrain();
    for (const path of SPELLINGS) {
      const res = await rawRequest(origin, path, 'POST', MCP_POST, PING);
      expect({ path, status: res.status }).toEqual({ path, status: 503 });
      expect(res.headers['retry-after']).toBe('5');
      expect(JSON.parse(res.text).error.code).toBe(-32000);
    }
  });

  it('serves requests on connections accepted before the drain began; refuses one accepted after', async () => {
    // Graceful shutdown closes the listener just before the drain: a connection accepted in that moment
    // brings its request afterwards, and a balancer cannot retry a POST it has sent.
    const app = await createTestApp(db.url, PROXY);
    apps.push(app);
    const origin = await originOf(app);
    const { hostname, port } = new URL(origin);
    const headers = { ...MCP_POST, ...asUser('drain-user') };
    // initialize: answered without a session, so a connection's first request can be a complete exchange.
    const INIT = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-11-25',
        capabilities: {},
        clientInfo: { name: 'drain', version: '1' },
      },
    });
    const early = connect(Number(port), hostname);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      await once(early, 'connect');
      await new Promise((r) => setTimeout(r, 100)); // accepted by the server, no request on it yet
      // A connection that carried a request before the drain and is kept alive for the next one.
      expect((await rawRequest(origin, '/mcp', 'POST', headers, INIT, { agent })).status).toBe(200);

      app.get(LifecycleService).beginDrain();
      const first = await new Promise<{ status: number; connection?: string; text: string }>(
        (resolve, reject) => {
          const req = httpRequest(
            { createConnection: () => early, path: '/mcp', method: 'POST', headers },
            (res) => {
              let text = '';
              res.on('data', (d: Buffer) => (text += d.toString()));
              res.on('end', () =>
                resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, text }),
              );
            },
          );
          req.on('error', reject);
          req.end(INIT);
        },
      );
      expect(first).toMatchObject({ status: 200, connection: 'close' });
      expect(JSON.parse(first.text).result.protocolVersion).toBe('2025-11-25');

      // The connection the agent kept: its last answer promised more, so the balancer may send on it until
      // its idle timeout; that request is served, and its answer closes the connection.
      const kept = await rawRequest(origin, '/mcp', 'POST', headers, INIT, { agent });
      expect(kept.status).toBe(200);
      expect(kept.headers.connection).toBe('close');
      // A connection accepted once the drain began (outside tests the listener is closed by then) is refused.
      const late = await rawRequest(origin, '/mcp', 'POST', headers, INIT, { agent: false });
      expect(late.status).toBe(503);
      expect(JSON.parse(late.text).error.code).toBe(-32000);
    } finally {
      early.destroy();
      agent.destroy();
    }
  });

  it('no client input grows the number of metric series', async () => {
    const app = await createTestApp(db.url, { MCP_CONFORMANCE_FIXTURES: 'true' });
    apps.push(app);
    const origin = await originOf(app);
    const url = `${origin}/mcp`;
    const session = await openSession(url, { elicitation: {} });
    const headers = sessionHeaders(session);
    const inSession = (body: unknown) => rpc(url, body, headers);
    const extraMethods = ['PROPFIND', 'MKCOL', 'LOCK', 'UNLOCK', 'SEARCH', 'REPORT', 'PURGE'];

    /** One of every kind of input a client chooses, with values that differ from round to round. */
    async function round(r: number): Promise<void> {
      const code = r === 0 ? 1 : 1000 + r * 7;
      const answered = await answerElicitationWithError(url, headers, code, 100 + r);
      expect(answered).toMatchObject({ answerStatus: 202, call: { error: { code } } });
      const fractional = await answerElicitationWithError(url, headers, code + 0.5, 200 + r);
      expect(fractional.answerStatus).toBe(400);
      await inSession({ jsonrpc: '2.0', id: 1, method: `x/${r}` });
      await inSession({ jsonrpc: '2.0', method: `notifications/x${r}` });
      await inSession({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: `no_tool_${r}` } });
      await inSession({ jsonrpc: '2.0', id: 3, method: 'prompts/get', params: { name: `no_prompt_${r}` } });
      await inSession({ jsonrpc: '2.0', id: 4, method: 'tasks/get', params: { taskId: `t-${r}` } });
      await modernCall(
        url,
        5,
        `y/${r}`,
        {},
        { meta: { 'io.modelcontextprotocol/protocolVersion': `1999-${r}` } },
      );
      await modernCall(url, 6, 'tools/call', { name: `no_tool_${r}` }, { name: `no_tool_${r}` });
      await rawRequest(origin, `/nowhere-${r}`, 'GET', {});
      await rawRequest(origin, r % 2 ? '/MCP/' : '/Mcp', 'POST', MCP_POST, PING);
      await rawRequest(origin, '/mcp', extraMethods[r % extraMethods.length], MCP_POST);
      await rawRequest(origin, `/metrics/${r}`, 'GET', {});
    }

    await round(0);
    await scrapeSeries(origin); // the first scrape is a request too
    const before = await scrapeSeries(origin);
    for (let r = 1; r <= 6; r++) await round(r);
    expect(newSeries(before, await scrapeSeries(origin))).toEqual([]);
  });

  describe('client responses (two instances on one database)', () => {
    let urlA: string;
    let urlB: string;

    beforeAll(async () => {
      const a = await createTestApp(db.url, { MCP_CONFORMANCE_FIXTURES: 'true' });
      const b = await createTestApp(db.url, {
        MCP_CONFORMANCE_FIXTURES: 'true',
        QUOTA_CLIENT_RESPONSE_BYTES_PER_SESSION: '4096',
      });
      apps.push(a, b);
      urlA = `${await originOf(a)}/mcp`;
      urlB = `${await originOf(b)}/mcp`;
    });

    const stored = async () =>
      withClient(db.url, async (c) => {
        const r = await c.query(
          `SELECT count(*)::int AS n, coalesce(sum(pg_column_size(payload)), 0)::int AS bytes
           FROM mcp_client_response WHERE payload IS NOT NULL`,
        );
        return r.rows[0] as { n: number; bytes: number };
      });

    it('refuses, and never stores, a response to a request the session never sent', async () => {
      const session = await openSession(urlB, { elicitation: {} });
      const junk = 'x'.repeat(200_000);
      for (let i = 0; i < 20; i++) {
        const res = await rpc(
          urlB,
          { jsonrpc: '2.0', id: `srv-forged-${i}`, result: { junk } },
          sessionHeaders(session),
        );
        expect({ i, status: res.status }).toEqual({ i, status: 400 });
        expect(res.json.error).toEqual({
          code: -32600,
          message: expect.stringMatching(/awaits this response/),
        });
      }
      // Not a srv- id either: nothing was asked with it.
      const other = await rpc(urlB, { jsonrpc: '2.0', id: 7, result: {} }, sessionHeaders(session));
      expect(other.status).toBe(400);
      expect(await stored()).toEqual({ n: 0, bytes: 0 });
    });

    it('an answer taken by the waiting instance itself is refused when repeated, at either instance', async () => {
      const session = await openSession(urlA, { elicitation: {} });
      const headers = sessionHeaders(session);
      const call = await openStream(urlA, {
        method: 'POST',
        headers: { ...MCP_POST, ...headers },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 32,
          method: 'tools/call',
          params: { name: 'test_elicitation', arguments: { message: 'who?' } },
        }),
      });
      try {
        let ask = await call.next();
        while (ask.json?.method !== 'elicitation/create') ask = await call.next();
        const answer = { jsonrpc: '2.0', id: ask.json.id, result: { action: 'decline' } };
        expect((await rpc(urlA, answer, headers)).status).toBe(202);
        expect((await rpc(urlB, answer, headers)).status).toBe(400);
        expect((await rpc(urlA, answer, headers)).status).toBe(400);
        expect((await call.next(5000)).json).toMatchObject({ id: 32, result: {} });
      } finally {
        call.close();
      }
      expect(await stored()).toEqual({ n: 0, bytes: 0 });
    });

    it('takes the answer to an outstanding request at another instance once, within the session quota', async () => {
      const session = await openSession(urlA, { elicitation: {} });
      const headers = sessionHeaders(session);
      const call = await openStream(urlA, {
        method: 'POST',
        headers: { ...MCP_POST, ...headers },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 31,
          method: 'tools/call',
          params: { name: 'test_elicitation', arguments: { message: 'who?' } },
        }),
      });
      try {
        let ask = await call.next();
        while (ask.json?.method !== 'elicitation/create') ask = await call.next();
        const content = { username: 'x'.repeat(5000), email: 'a@b.c' };
        // Another session of the same principal did not send it.
        const foreign = await openSession(urlB, { elicitation: {} });
        const elsewhere = await rpc(
          urlB,
          { jsonrpc: '2.0', id: ask.json.id, result: { action: 'accept', content } },
          sessionHeaders(foreign),
        );
        expect(elsewhere.status).toBe(400);
        // B's quota of parked answers is 4096 bytes: this one is refused, and the request stays outstanding.
        const big = await rpc(
          urlB,
          { jsonrpc: '2.0', id: ask.json.id, result: { action: 'accept', content } },
          headers,
        );
        expect(big.status).toBe(413);
        expect(big.json.error.data).toEqual({
          quota: 'client_response_bytes',
          limit: 4096,
          setting: 'QUOTA_CLIENT_RESPONSE_BYTES_PER_SESSION',
        });
        const answer = { jsonrpc: '2.0', id: ask.json.id, result: { action: 'decline' } };
        expect((await rpc(urlB, answer, headers)).status).toBe(202);
        const done = await call.next(5000);
        expect(done.json).toEqual({
          jsonrpc: '2.0',
          id: 31,
          result: { content: [{ type: 'text', text: 'User response: action=decline, content={}' }] },
        });
        // Answered: a second answer, at either instance, is refused.
        expect((await rpc(urlB, answer, headers)).status).toBe(400);
        expect((await rpc(urlA, answer, headers)).status).toBe(400);
      } finally {
        call.close();
      }
      expect(await stored()).toEqual({ n: 0, bytes: 0 });
      // Nothing outstanding is left behind once the call ended.
      const left = await withClient(db.url, (c) =>
        c.query('SELECT count(*)::int AS n FROM mcp_client_response WHERE session_id = $1', [session]),
      );
      expect(left.rows).toEqual([{ n: 0 }]);
    });
  });

  it('DNS rebinding without credentials: 403 from the origin policy, no auth challenge', async () => {
    const origin = await start({});
    const forged: Record<string, string>[] = [
      { origin: 'https://evil.example' },
      { origin: 'null' },
      { host: 'evil.example' },
      { host: 'evil.example:80', origin: 'http://evil.example' },
    ];
    for (const extra of forged) {
      for (const method of ['POST', 'GET', 'DELETE']) {
        const res = await rawRequest(
          origin,
          '/mcp',
          method,
          { ...MCP_POST, ...extra },
          method === 'POST' ? PING : undefined,
        );
        expect({ extra, method, status: res.status }).toEqual({ extra, method, status: 403 });
        expect(res.headers['www-authenticate']).toBeUndefined();
        expect(JSON.parse(res.text)).toEqual({
          jsonrpc: '2.0',
          id: null,
          error: { code: -32000, message: expect.stringMatching(/^Forbidden: (Host|Origin) /) },
        });
      }
    }
    // A loopback page still gets the challenge that tells it how to sign in.
    const ok = await rawRequest(origin, '/mcp', 'POST', { ...MCP_POST, origin: 'http://localhost' }, PING);
    expect(ok.status).toBe(401);
  });
});
