import type { INestApplication } from '@nestjs/common';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

interface Answer {
  status: number;
  contentType: string | undefined;
  body: unknown;
}

/** POSTs raw bytes, so the body reaches the server exactly as written (no client-side JSON encoding). */
function postRaw(port: number, path: string, contentType: string, bytes: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        headers: {
          'content-type': contentType,
          'content-length': String(bytes.length),
          accept: 'application/json, text/event-stream',
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({
            status: res.statusCode ?? 0,
            contentType: res.headers['content-type'],
            body: text === '' ? undefined : (JSON.parse(text) as unknown),
          });
        });
      },
    );
    req.on('error', reject);
    req.end(bytes);
  });
}

const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const deep = (levels: number): string => '['.repeat(levels) + ']'.repeat(levels);

/**
 * The plain `Content-Type: application/json` body is read by the server's own reader
 * (src/common/json-body-reader.ts); with a charset parameter the same bytes go through body-parser. Both
 * must answer every body alike: the reader is a shortcut, never a second dialect.
 */
describe('JSON body reader (real AppModule over HTTP)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let port: number;

  beforeAll(async () => {
    db = await createTestDatabase('jsonbody');
    app = await createTestApp(db.url, { JSON_MAX_DEPTH: '16' });
    port = (app.getHttpServer().address() as AddressInfo).port;
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  const cases: [string, string, Buffer, number][] = [
    ['a request (no session)', '/mcp', Buffer.from('{"jsonrpc":"2.0","id":1,"method":"ping"}'), 400],
    [
      'the same after a byte order mark',
      '/mcp',
      Buffer.concat([BOM, Buffer.from('{"jsonrpc":"2.0","id":2,"method":"ping"}')]),
      400,
    ],
    ['a byte order mark alone (an empty body is {})', '/mcp', BOM, 400],
    ['malformed JSON', '/mcp', Buffer.from('{"jsonrpc":"2.0","id":'), 400],
    ['a primitive', '/mcp', Buffer.from('42'), 400],
    [
      'invalid UTF-8 in a string',
      '/mcp',
      Buffer.concat([
        Buffer.from('{"jsonrpc":"2.0","id":"'),
        Buffer.from([0xff, 0xfe]),
        Buffer.from('","method":"ping"}'),
      ]),
      400,
    ],
    [
      'a NUL escape, which cannot be stored (a JSON-RPC error, HTTP 200)',
      '/mcp',
      Buffer.from(
        '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","arguments":{"a":"\\u0000"}}}',
      ),
      200,
    ],
    [
      'nesting past JSON_MAX_DEPTH',
      '/mcp',
      Buffer.from(`{"jsonrpc":"2.0","id":4,"method":"ping","params":{"a":${deep(40)}}}`),
      400,
    ],
    ['malformed JSON off /mcp', '/nowhere', Buffer.from('{"a":'), 400],
    ['well-formed JSON off /mcp', '/nowhere', Buffer.from('{"a":1}'), 404],
  ];

  it.each(cases)('answers %s as body-parser does', async (_what, path, bytes, status) => {
    const fast = await postRaw(port, path, 'application/json', bytes);
    const parser = await postRaw(port, path, 'application/json; charset=utf-8', bytes);
    expect(fast.status).toBe(status);
    expect(fast).toEqual(parser);
  });

  it('tells the three refusals apart (parse error, invalid request, shape limit)', async () => {
    const code = async (bytes: Buffer): Promise<number> =>
      ((await postRaw(port, '/mcp', 'application/json', bytes)).body as { error: { code: number } }).error
        .code;
    expect(await code(Buffer.from('{"jsonrpc":'))).toBe(-32700);
    expect(await code(BOM)).toBe(-32600);
    expect(await code(Buffer.from(`{"jsonrpc":"2.0","id":5,"method":"ping","params":${deep(40)}}`))).not.toBe(
      -32700,
    );
  });
});
