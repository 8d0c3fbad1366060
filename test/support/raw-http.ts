import { once } from 'node:events';
import { request as httpRequest, type Agent, type OutgoingHttpHeaders } from 'node:http';
import { connect, type Socket } from 'node:net';

export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/**
 * A request with any path and headers, sent as written (fetch normalises paths and will not forge Host).
 * `localAddress` picks the loopback source address (any of 127.0.0.0/8), so a test can be a new client.
 */
export function rawRequest(
  origin: string,
  path: string,
  method: string,
  headers: OutgoingHttpHeaders,
  body?: string,
  options: { agent?: Agent | false; localAddress?: string } = {},
): Promise<RawAnswer> {
  const { hostname, port } = new URL(origin);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ hostname, port, path, method, headers, ...options }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/** The headers every POST /mcp needs. */
export const MCP_POST = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
} as const;

interface Exchange {
  head: Promise<Omit<RawAnswer, 'text'>>;
  answer: Promise<RawAnswer>;
}

/**
 * One HTTP/1.1 connection held open by hand, the way a balancer's upstream pool holds one: requests go out
 * on it one after another, and `closedBy` says when the server ended it. (Node's Agent hides that moment,
 * and opens a new connection once the old one is gone.)
 */
export class HeldConnection {
  private readonly socket: Socket;
  private buffer = Buffer.alloc(0);
  private current: ((chunk?: Buffer) => void) | undefined;
  /** Resolves with Date.now() when the server ends the connection. */
  readonly closedBy: Promise<number>;

  private constructor(
    socket: Socket,
    private readonly host: string,
  ) {
    this.socket = socket;
    this.closedBy = new Promise((resolve) => socket.once('end', () => resolve(Date.now())));
    socket.on('data', (d: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, d]);
      this.current?.();
    });
    socket.on('end', () => this.current?.());
    socket.on('error', () => undefined);
  }

  static async open(origin: string): Promise<HeldConnection> {
    const { host, hostname, port } = new URL(origin);
    const socket = connect(Number(port), hostname);
    await once(socket, 'connect');
    return new HeldConnection(socket, host);
  }

  get ended(): boolean {
    return this.socket.readableEnded;
  }

  /** Sends one request; `head` resolves when the status line and headers are in, `answer` at the body's end. */
  send(method: string, path: string, headers: Record<string, string>, body = ''): Exchange {
    if (this.current) throw new Error('one exchange at a time');
    const lines = [`${method} ${path} HTTP/1.1`, `host: ${this.host}`];
    for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
    lines.push(`content-length: ${Buffer.byteLength(body)}`);
    this.socket.write(`${lines.join('\r\n')}\r\n\r\n${body}`);

    let gotHead!: (h: Omit<RawAnswer, 'text'>) => void;
    let gotAnswer!: (a: RawAnswer) => void;
    let failed!: (e: Error) => void;
    const head = new Promise<Omit<RawAnswer, 'text'>>((resolve, reject) => {
      gotHead = resolve;
      failed = reject;
    });
    const answer = new Promise<RawAnswer>((resolve, reject) => {
      gotAnswer = resolve;
      const fail = failed;
      failed = (e) => {
        fail(e);
        reject(e);
      };
    });
    answer.catch(() => undefined);
    let parsedHead: Omit<RawAnswer, 'text'> | undefined;
    let text = '';
    const step = (): void => {
      if (!parsedHead) {
        const end = this.buffer.indexOf('\r\n\r\n');
        if (end < 0) {
          if (this.socket.readableEnded) failed(new Error('connection ended before an answer'));
          return;
        }
        const [status, ...fields] = this.buffer.subarray(0, end).toString('latin1').split('\r\n');
        const headersIn: Record<string, string> = {};
        for (const f of fields) {
          const i = f.indexOf(':');
          headersIn[f.slice(0, i).trim().toLowerCase()] = f.slice(i + 1).trim();
        }
        parsedHead = { status: Number(status.split(' ')[1]), headers: headersIn };
        this.buffer = this.buffer.subarray(end + 4);
        gotHead(parsedHead);
      }
      const h = parsedHead.headers as Record<string, string>;
      if (h['transfer-encoding'] === 'chunked') {
        for (;;) {
          const lineEnd = this.buffer.indexOf('\r\n');
          if (lineEnd < 0) break;
          const size = parseInt(this.buffer.subarray(0, lineEnd).toString('latin1'), 16);
          if (this.buffer.length < lineEnd + 2 + size + 2) break;
          text += this.buffer.subarray(lineEnd + 2, lineEnd + 2 + size).toString('utf8');
          this.buffer = this.buffer.subarray(lineEnd + 2 + size + 2);
          if (size === 0) return finish();
        }
      } else {
        const length = Number(h['content-length'] ?? 0);
        if (this.buffer.length >= length) {
          text = this.buffer.subarray(0, length).toString('utf8');
          this.buffer = this.buffer.subarray(length);
          return finish();
        }
      }
      if (this.socket.readableEnded) failed(new Error('connection ended inside an answer'));
    };
    const finish = (): void => {
      this.current = undefined;
      gotAnswer({ ...parsedHead!, text });
    };
    this.current = step;
    step();
    return { head, answer };
  }

  destroy(): void {
    this.socket.destroy();
  }
}
