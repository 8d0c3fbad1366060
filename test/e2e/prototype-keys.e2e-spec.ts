import type { INestApplication } from '@nestjs/common';
import type { AddressInfo } from 'node:net';
import { modernCall, openSession, responseOf, rpc, sessionHeaders } from '../support/mcp-http.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/** Names every plain object inherits; a lookup keyed by client input must never find them. */
const PROTOTYPE_KEYS = ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf'];

describe('client input named like an Object.prototype key (both eras, real HTTP)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;
  let session: string;

  beforeAll(async () => {
    db = await createTestDatabase('protokeys');
    app = await createTestApp(db.url);
    url = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}/mcp`;
    session = await openSession(url);
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('answers resources/read of text://glossary/<prototype key> with resource not found (legacy era)', async () => {
    for (const [i, term] of PROTOTYPE_KEYS.entries()) {
      const uri = `text://glossary/${term}`;
      const a = await rpc(
        url,
        { jsonrpc: '2.0', id: i + 1, method: 'resources/read', params: { uri } },
        sessionHeaders(session),
      );
      expect(a.status).toBe(200);
      expect(responseOf(a).error).toEqual({
        code: -32002,
        message: `No glossary entry for ${term}`,
        data: { uri },
      });
    }
    const known = await rpc(
      url,
      { jsonrpc: '2.0', id: 99, method: 'resources/read', params: { uri: 'text://glossary/stem' } },
      sessionHeaders(session),
    );
    expect(responseOf(known).result.contents[0].text).toMatch(/base form/);
  });

  it('answers the same reads with -32602 naming the uri (2026-07-28)', async () => {
    for (const [i, term] of PROTOTYPE_KEYS.entries()) {
      const uri = `text://glossary/${term}`;
      const a = await modernCall(url, i + 1, 'resources/read', { uri }, { name: uri });
      expect(a.status).toBe(200);
      expect(responseOf(a).error).toMatchObject({ code: -32602, data: { uri } });
    }
  });

  it('lists only the real glossary terms', async () => {
    const a = await rpc(
      url,
      { jsonrpc: '2.0', id: 1, method: 'resources/read', params: { uri: 'text://glossary' } },
      sessionHeaders(session),
    );
    expect(JSON.parse(responseOf(a).result.contents[0].text)).toEqual(['token', 'stem', 'stopword']);
  });
});
