// Shared by the benchmarks: scratch databases on a PostgreSQL server, and percentile summaries.
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import http from 'node:http';
import pg from 'pg';

/** Runs one statement on the server's `postgres` database (CREATE / DROP DATABASE). */
export async function admin(serverUrl, sql) {
  const u = new URL(serverUrl);
  u.pathname = '/postgres';
  const c = new pg.Client({ connectionString: u.toString() });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

export function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export function summary(label, ms, digits = 2) {
  const s = [...ms].sort((a, b) => a - b);
  const f = (v) => v.toFixed(digits);
  return `${label}: n=${s.length} p50=${f(pct(s, 50))} ms p95=${f(pct(s, 95))} ms p99=${f(pct(s, 99))} ms max=${f(s[s.length - 1])} ms`;
}

/**
 * Spawns a Node server process (`args` after the node binary) with only PATH and HOME of this environment
 * plus `env`, and resolves once it logs "listening on http://host:PORT". The log is kept, bounded, for
 * diagnosis. Resolves { proc, port, base, url, output(), logLines(), exited }; rejects if the process exits,
 * or kills it and rejects if it has not said it listens within `timeoutMs`.
 */
export function spawnServer(args, env = {}, { label = 'server', cwd, timeoutMs = 60000 } = {}) {
  const proc = spawn(process.execPath, args, {
    cwd,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let lines = 0;
  const exited = new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      // Never leave a server behind that no caller holds a handle to.
      proc.kill('SIGKILL');
      reject(new Error(`${label} did not start:\n${out}`));
    }, timeoutMs);
    let started = false;
    const onData = (d) => {
      const text = d.toString();
      for (const ch of text) if (ch === '\n') lines++;
      out = (out + text).slice(-20000);
      const m = started ? null : /listening on http:\/\/[^:\s]+:(\d+)/.exec(out);
      if (m) {
        started = true;
        clearTimeout(timer);
        const port = Number(m[1]);
        resolve({
          label,
          proc,
          port,
          base: `http://127.0.0.1:${port}`,
          url: `http://127.0.0.1:${port}/mcp`,
          output: () => out.slice(-4000),
          logLines: () => lines,
          exited,
        });
      }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${label} exited with ${code}:\n${out}`));
    });
  });
}

/**
 * POSTs a JSON-RPC body through `agent`; resolves { status, headers, json } where json is the JSON answer or,
 * for an SSE answer, its last message carrying a result or an error.
 */
export function postRpc(agent, url, body, headers = {}) {
  const data = JSON.stringify(body);
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'content-length': Buffer.byteLength(data),
          ...headers,
        },
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          let json;
          if ((res.headers['content-type'] ?? '').includes('text/event-stream')) {
            for (const line of text.split('\n')) {
              if (!line.startsWith('data:')) continue;
              const msg = JSON.parse(line.slice(5));
              if ('result' in msg || 'error' in msg) json = msg;
            }
          } else if (text) json = JSON.parse(text);
          resolve({ status: res.statusCode, headers: res.headers, json });
        });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

const LEGACY_VERSION = '2025-11-25';
let rpcId = 0;

/** A fresh JSON-RPC request id (one counter for every bench in the process). */
export const nextRpcId = () => ++rpcId;

/** The result of an answer from postRpc; throws, naming `what`, on an HTTP or JSON-RPC error. */
export function rpcResult(answer, what) {
  if (answer.status >= 300 || !answer.json || answer.json.error) {
    throw new Error(`${what}: HTTP ${answer.status} ${JSON.stringify(answer.json)}`);
  }
  return answer.json.result;
}

/**
 * A 2025-11-25 request through `agent`, in session `sid` when given; resolves to its result. `extra` headers
 * (a principal's credentials) go with it.
 */
export async function legacyRpc(agent, url, sid, method, params, extra = {}) {
  const headers = { ...extra, 'mcp-protocol-version': LEGACY_VERSION, ...(sid ? { 'mcp-session-id': sid } : {}) };
  return rpcResult(await postRpc(agent, url, { jsonrpc: '2.0', id: nextRpcId(), method, params }, headers), method);
}

/**
 * initialize + notifications/initialized over `agent`; resolves to the Mcp-Session-Id. `extra` headers (a
 * principal's credentials) go with both: a session belongs to the principal that opened it.
 */
export async function openLegacySession(agent, url, clientName = 'bench', extra = {}) {
  const init = await postRpc(
    agent,
    url,
    {
      jsonrpc: '2.0',
      id: nextRpcId(),
      method: 'initialize',
      params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: clientName, version: '1.0.0' } },
    },
    extra,
  );
  rpcResult(init, 'initialize');
  const sid = init.headers['mcp-session-id'];
  const ack = await postRpc(
    agent,
    url,
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { ...extra, 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY_VERSION },
  );
  if (ack.status !== 202) throw new Error(`notifications/initialized: HTTP ${ack.status}`);
  return sid;
}

/** SIGTERM, then SIGKILL after 15 s if it has not exited; resolves at exit (at once if it already has). */
export function stopServer(server) {
  if (server.proc.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    server.proc.once('exit', resolve);
    server.proc.kill('SIGTERM');
    setTimeout(() => server.proc.kill('SIGKILL'), 15000).unref();
  });
}

/**
 * A scratch database `<prefix>_<random>` on the PostgreSQL server `serverUrl`, with the environment a bench
 * server runs on it (bench tools on, rate limits off, the per-owner limit out of the way).
 */
export async function benchServerDatabase(serverUrl, prefix) {
  const dbName = `${prefix}_${randomBytes(4).toString('hex')}`;
  await admin(serverUrl, `CREATE DATABASE "${dbName}"`);
  const u = new URL(serverUrl);
  u.pathname = `/${dbName}`;
  const env = {
    PORT: '0',
    DATABASE_URL: u.toString(),
    MCP_BENCH_TOOLS: 'true',
    LOG_LEVEL: 'log',
    RATE_LIMIT_PRINCIPAL_RPS: '0',
    RATE_LIMIT_ADDRESS_RPS: '0',
    TASK_MAX_PER_OWNER: '100000',
  };
  return {
    env,
    drop: () =>
      admin(serverUrl, `DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`).catch(() => undefined),
  };
}
