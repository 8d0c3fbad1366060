import { spawn } from 'node:child_process';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { stopListening } from './graceful-shutdown.js';

/**
 * A client in another process that connects 100 ms after `go()` and sends a POST at once; `ready` resolves
 * when it listens for `go`, `answer` with the status line it got back or its socket error. With `go()` called
 * right before this process's loop turns busy, the kernel completes the connection and it waits in the listen
 * backlog. (A timer started when the child says it is ready raced this process reading that: on a loaded
 * machine the connection came in, and was served, before the loop turned busy.)
 */
function delayedClient(port: number): { ready: Promise<void>; go(): void; answer: Promise<string> } {
  const script = `
    const net = require('node:net');
    process.stdin.once('data', () => setTimeout(() => {
      const s = net.connect(${port}, '127.0.0.1', () =>
        s.write('POST /x HTTP/1.1\\r\\nHost: a\\r\\nContent-Length: 0\\r\\nConnection: close\\r\\n\\r\\n'));
      let got = '';
      s.on('data', (d) => (got += d));
      s.on('error', (e) => { process.stdout.write('error ' + e.code); process.exit(0); });
      s.on('close', () => { process.stdout.write(got.split('\\r\\n')[0]); process.exit(0); });
    }, 100));
    process.stderr.write('ready\\n');`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'pipe'] });
  const ready = new Promise<void>((resolve, reject) => {
    child.stderr.once('data', () => resolve());
    child.once('error', reject);
  });
  const answer = new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.once('error', reject);
    child.once('exit', () => resolve(out));
  });
  return { ready, go: () => child.stdin.write('go\n'), answer };
}

/** Blocks this event loop long enough for the client above to start, connect and send. */
function busy(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // spin: the loop must not accept the client's connection before the close
  }
}

describe('stopListening', () => {
  let server: Server;
  beforeEach(async () => {
    server = http.createServer((_req, res) => res.end('ok'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  });
  afterEach(async () => {
    server.closeAllConnections();
    if (server.listening) await new Promise((r) => server.close(r));
  });

  it('serves a connection the kernel completed while the loop was busy, instead of resetting it', async () => {
    const client = delayedClient((server.address() as AddressInfo).port);
    await client.ready;
    client.go();
    busy(1000); // the client connects and sends 100 ms into it
    await stopListening(server);
    expect(await client.answer).toBe('HTTP/1.1 200 OK');
    expect(server.listening).toBe(false);
  });

  it('(the case it guards against) a plain close right after the busy loop resets that connection', async () => {
    const client = delayedClient((server.address() as AddressInfo).port);
    await client.ready;
    client.go();
    busy(1000);
    server.close();
    expect(await client.answer).toBe('error ECONNRESET');
  });
});
