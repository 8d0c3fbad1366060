import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AddressInfo } from 'node:net';
import { ApiKeysService } from '../../src/principals/api-keys.service.js';
import { McpTool, type ToolContext } from '../../src/tool-dispatch/index.js';
import { MODERN, openSession, openStream, sessionHeaders } from '../support/mcp-http.js';
import { TestIssuer } from '../support/oidc-issuer.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const RESOURCE = 'https://mcp.example.test/mcp';
const KEEPALIVE_MS = 1000;

/** A call that reports progress once, then runs until cancelled: its SSE answer stays open. */
@Injectable()
class HoldOpenTools {
  @McpTool({ name: 'hold_open', description: 'Reports progress, then waits until cancelled.' })
  async holdOpen(_args: unknown, ctx: ToolContext): Promise<string> {
    await ctx.progress({ progress: 1, total: 2, message: 'started' });
    await sleep(30_000, undefined, { signal: ctx.signal, ref: false });
    return 'never';
  }
}

@Module({ providers: [HoldOpenTools] })
class HoldOpenModule {}

type Stream = Awaited<ReturnType<typeof openStream>>;
/** Every stream a test opened, closed at the end whatever happened. */
const opened: Stream[] = [];

/** The first event carrying a JSON-RPC message (skipping priming events). */
async function nextMessage(stream: Stream): Promise<{ method?: string }> {
  for (;;) {
    const ev = await stream.next();
    if (ev.json) return ev.json as { method?: string };
  }
}

/** Resolves 'ended' when the server closes the stream, 'open' if it is still open after `ms`. */
async function endedWithin(stream: Stream, ms: number): Promise<'ended' | 'open'> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      await stream.next(Math.max(1, deadline - Date.now()));
    } catch (err) {
      if ((err as Error).message === 'stream ended') return 'ended';
      if ((err as Error).message === 'no SSE event in time') return 'open';
      throw err;
    }
  }
}

describe('streams stop when the credential that opened them lapses (real HTTP, short keep-alive)', () => {
  let db: TestDatabase;
  let issuer: TestIssuer;
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    db = await createTestDatabase('streamcred');
    issuer = await TestIssuer.start(RESOURCE);
    app = await createTestApp(
      db.url,
      {
        AUTH_PROVIDERS: 'oidc,apikey',
        OIDC_ISSUER: issuer.issuer,
        MCP_RESOURCE_URL: RESOURCE,
        SSE_KEEPALIVE_MS: String(KEEPALIVE_MS),
        SHUTDOWN_GRACE_MS: '1000',
      },
      [HoldOpenModule],
    );
    url = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}/mcp`;
  });
  afterAll(async () => {
    for (const s of opened) s.close();
    await app.close();
    await issuer.close();
    await db.drop();
  });

  const sse = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

  async function openAll(auth: Record<string, string>): Promise<Record<string, Stream>> {
    const session = await openSession(url, {}, auth);
    const get = await openStream(url, {
      method: 'GET',
      headers: { accept: 'text/event-stream', ...sessionHeaders(session, auth) },
    });
    const answer = await openStream(url, {
      method: 'POST',
      headers: { ...sse, ...sessionHeaders(session, auth) },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'hold_open', arguments: {}, _meta: { progressToken: 'p1' } },
      }),
    });
    const listen = await openStream(url, {
      method: 'POST',
      headers: { ...sse, ...auth, 'mcp-protocol-version': MODERN, 'mcp-method': 'subscriptions/listen' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 8,
        method: 'subscriptions/listen',
        params: {
          notifications: { toolsListChanged: true },
          _meta: {
            'io.modelcontextprotocol/protocolVersion': MODERN,
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      }),
    });
    opened.push(get, answer, listen);
    for (const s of [get, answer, listen]) expect(s.status).toBe(200);
    // Each has said something: the priming event, the progress notification, the acknowledgement.
    await get.next();
    expect((await nextMessage(answer)).method).toBe('notifications/progress');
    expect((await nextMessage(listen)).method).toBe('notifications/subscriptions/acknowledged');
    return { get, answer, listen };
  }

  it('closes GET streams, SSE answers and listens of a revoked API key at the next keep-alive', async () => {
    const keys = app.get(ApiKeysService);
    const created = await keys.create('stream-key', []);
    const streams = await openAll({ 'x-api-key': created.key });
    try {
      // Valid credentials: every stream survives several keep-alives.
      const before = await Promise.all(Object.values(streams).map((s) => endedWithin(s, KEEPALIVE_MS * 2.5)));
      expect(before).toEqual(['open', 'open', 'open']);
      expect(await keys.revoke(created.id)).toBe(true);
      const after = await Promise.all(Object.values(streams).map((s) => endedWithin(s, KEEPALIVE_MS * 10)));
      expect(after).toEqual(['ended', 'ended', 'ended']);
    } finally {
      for (const s of Object.values(streams)) s.close();
    }
  });

  it('closes the streams of an OIDC token once it expires, and keeps those of a valid one', async () => {
    const shortLived = await openAll({ authorization: `Bearer ${await issuer.sign({}, { expiresIn: 2 })}` });
    const longLived = await openAll({ authorization: `Bearer ${await issuer.sign({}, { expiresIn: 300 })}` });
    try {
      const ended = await Promise.all(
        Object.values(shortLived).map((s) => endedWithin(s, 2000 + KEEPALIVE_MS * 10)),
      );
      expect(ended).toEqual(['ended', 'ended', 'ended']);
      const still = await Promise.all(
        Object.values(longLived).map((s) => endedWithin(s, KEEPALIVE_MS * 1.5)),
      );
      expect(still).toEqual(['open', 'open', 'open']);
    } finally {
      for (const s of [...Object.values(shortLived), ...Object.values(longLived)]) s.close();
    }
  });
});
