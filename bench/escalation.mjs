// Escalation timing over real HTTP (2026-07-28, tasks extension declared): time to first byte and to the full
// response of a tools/call that finishes inside the inline window (slow_compute seconds 0 → resultType
// "complete") versus one that outlives it (seconds 1 → a CreateTaskResult after TASK_INLINE_WINDOW_MS).
// Not run in CI.
//
//   npm run build
//   DATABASE_URL=postgres://user@host:5432/postgres node bench/escalation.mjs [requests per kind]
//
// It creates a scratch database next to the one named in DATABASE_URL, starts the built server on loopback
// (MCP_CONFORMANCE_FIXTURES=true), sends the requests one at a time (inline and escalated interleaved, after
// a short warm-up), stops the server with SIGTERM and drops the database.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { admin, spawnServer, summary } from './bench-support.mjs';

const REQUESTS = Math.max(1, Math.min(Number(process.argv[2] ?? 40), 200));
const WARMUP = 5;
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

const base = process.env.DATABASE_URL;
if (!base) throw new Error('set DATABASE_URL to a PostgreSQL server the benchmark may create a database on');

let nextId = 1;
/** One modern tools/call; resolves with ms to the first body byte, ms to the end, and the parsed result. */
function call(port, seconds) {
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: nextId++,
    method: 'tools/call',
    params: {
      name: 'slow_compute',
      arguments: { seconds },
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
      },
    },
  });
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const ms = () => Number(process.hrtime.bigint() - started) / 1e6;
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: '/mcp',
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'content-length': Buffer.byteLength(body),
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'tools/call',
          'mcp-name': 'slow_compute',
        },
      },
      (res) => {
        let ttfb;
        let text = '';
        res.on('data', (chunk) => {
          ttfb ??= ms();
          text += chunk;
        });
        res.on('end', () => {
          const total = ms();
          try {
            const json = text.trimStart().startsWith('{')
              ? JSON.parse(text)
              : JSON.parse(
                  /data: (.*)\n/.exec(
                    text
                      .split('\n\n')
                      .filter((b) => b.includes('"result"'))
                      .pop(),
                  )[1],
                );
            resolve({ ttfb, total, result: json.result });
          } catch (err) {
            reject(new Error(`unexpected answer ${res.statusCode}: ${text} (${err})`));
          }
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const name = `bench_escalation_${randomBytes(4).toString('hex')}`;
await admin(base, `CREATE DATABASE "${name}"`);
const url = new URL(base);
url.pathname = `/${name}`;
const server = await spawnServer(
  [join(ROOT, 'dist', 'src', 'main.js')],
  {
    DATABASE_URL: url.toString(),
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: 'log',
    MCP_CONFORMANCE_FIXTURES: 'true',
    TASK_MAX_PER_OWNER: '1000',
  },
  { cwd: ROOT },
);
try {
  const port = server.port;
  for (let i = 0; i < WARMUP; i++) {
    await call(port, 0);
    await call(port, 1);
  }
  const inline = { ttfb: [], total: [] };
  const escalated = { ttfb: [], total: [] };
  for (let i = 0; i < REQUESTS; i++) {
    const a = await call(port, 0);
    if (a.result?.resultType !== 'complete')
      throw new Error(`expected an inline result: ${JSON.stringify(a.result)}`);
    inline.ttfb.push(a.ttfb);
    inline.total.push(a.total);
    const b = await call(port, 1);
    if (b.result?.resultType !== 'task') throw new Error(`expected a task: ${JSON.stringify(b.result)}`);
    escalated.ttfb.push(b.ttfb);
    escalated.total.push(b.total);
  }
  console.log(`escalation over HTTP on loopback, ${REQUESTS} requests of each kind, one at a time`);
  console.log(summary('inline   (seconds 0) TTFB', inline.ttfb));
  console.log(summary('inline   (seconds 0) full', inline.total));
  console.log(summary('escalated (seconds 1) TTFB', escalated.ttfb));
  console.log(summary('escalated (seconds 1) full', escalated.total));
} finally {
  server.proc.kill('SIGTERM');
  await server.exited;
  await admin(base, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
}
