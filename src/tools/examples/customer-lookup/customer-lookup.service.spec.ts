import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ToolTestHarness } from '../../../testing/index.js';
import { CustomerLookupModule } from './customer-lookup.module.js';

const SECRET = 'directory-secret-0123456789';
type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A stand-in customer directory on loopback: each request is answered by the next scripted handler. */
class FakeDirectory {
  readonly requests: { url: string; authorization?: string }[] = [];
  private script: Handler[] = [];
  private readonly server: Server = createServer((req, res) => {
    this.requests.push({ url: req.url ?? '', authorization: req.headers.authorization });
    const handler = this.script.length > 1 ? this.script.shift()! : this.script[0];
    handler(req, res);
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  answer(...handlers: Handler[]): void {
    this.script = handlers;
    this.requests.length = 0;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

const json =
  (status: number, body: unknown): Handler =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
const hang: Handler = () => undefined; // never answers

const text = (result: { content: unknown[] }): string => (result.content[0] as { text: string }).text;

describe('lookup_customer (example outbound HTTP call)', () => {
  const directory = new FakeDirectory();
  let tools: ToolTestHarness;
  let baseUrl: string;
  const harness = (env: Record<string, string> = {}) =>
    ToolTestHarness.create([CustomerLookupModule], {
      env: {
        EXAMPLE_HTTP_BASE_URL: baseUrl,
        EXAMPLE_HTTP_SECRET: SECRET,
        EXAMPLE_HTTP_BACKOFF_MS: '10',
        EXAMPLE_HTTP_TIMEOUT_MS: '2000',
        ...env,
      },
    });

  beforeAll(async () => {
    baseUrl = await directory.start();
    tools = await harness();
  });
  afterAll(async () => {
    await tools.close();
    await directory.stop();
  });

  it('sends the secret as a bearer token and returns only the fields of the output schema', async () => {
    directory.answer(json(200, { id: 'C-1001', name: 'Ada Lovelace', tier: 'gold', internalNotes: 'x' }));
    const { result } = await tools.call('lookup_customer', { customerId: 'C-1001' });
    expect(result.isError).toBeUndefined();
    expect(result.structuredContent).toEqual({ id: 'C-1001', name: 'Ada Lovelace', tier: 'gold' });
    expect(directory.requests).toEqual([{ url: '/customers/C-1001', authorization: `Bearer ${SECRET}` }]);
  });

  it('retries 5xx answers with backoff, telling the client through log messages, then succeeds', async () => {
    directory.answer(json(503, {}), json(502, {}), json(200, { id: 'C-1', name: 'Grace' }));
    const { result, logs } = await tools.call('lookup_customer', { customerId: 'C-1' });
    expect(result.structuredContent).toEqual({ id: 'C-1', name: 'Grace' });
    expect(directory.requests).toHaveLength(3);
    expect(logs.map((l) => [l.level, l.data])).toEqual([
      ['warning', 'attempt 1 of 3 failed (HTTP 503), retrying in 10 ms'],
      ['warning', 'attempt 2 of 3 failed (HTTP 502), retrying in 20 ms'],
    ]);
  });

  it('gives up after the configured retries with an error result the model can read', async () => {
    directory.answer(json(500, { error: 'boom' }));
    const { result } = await tools.call('lookup_customer', { customerId: 'C-2' });
    expect(result.isError).toBe(true);
    expect(text(result)).toBe(
      'The customer directory did not answer after 3 attempt(s) (last: HTTP 500). Try again later.',
    );
    expect(directory.requests).toHaveLength(3);
  });

  it('does not retry a 4xx answer, and never shows the secret even when the service echoes it', async () => {
    directory.answer(json(404, {}));
    const missing = await tools.call('lookup_customer', { customerId: 'C-404' });
    expect(missing.result).toMatchObject({ isError: true });
    expect(text(missing.result)).toBe('No customer with id C-404.');
    expect(directory.requests).toHaveLength(1);

    directory.answer(json(401, {}));
    const refused = await tools.call('lookup_customer', { customerId: 'C-1' });
    expect(text(refused.result)).toMatch(/refused this server's credentials \(HTTP 401\)/);
    expect(directory.requests).toHaveLength(1);

    directory.answer(json(400, { error: `bad token ${SECRET}` }));
    const echoed = await tools.call('lookup_customer', { customerId: 'C-1' });
    expect(text(echoed.result)).toMatch(
      /^The customer directory refused the request \(HTTP 400\): .*\[redacted\]/,
    );
    expect(JSON.stringify([missing, refused, echoed])).not.toContain(SECRET);
  });

  it('times out each attempt, retries, and reports the timeout', async () => {
    const quick = await harness({ EXAMPLE_HTTP_TIMEOUT_MS: '200', EXAMPLE_HTTP_RETRIES: '1' });
    try {
      directory.answer(hang);
      const { result } = await quick.call('lookup_customer', { customerId: 'C-1' });
      expect(text(result)).toBe(
        'The customer directory did not answer after 2 attempt(s) (last: timeout after 200 ms). Try again later.',
      );
      expect(directory.requests).toHaveLength(2);
    } finally {
      await quick.close();
    }
  });

  it('stops the request when the call is cancelled, without retrying', async () => {
    directory.answer(hang);
    const cancel = new AbortController();
    const running = tools.call('lookup_customer', { customerId: 'C-1' }, { signal: cancel.signal });
    while (directory.requests.length === 0) await new Promise((r) => setTimeout(r, 10));
    cancel.abort();
    await expect(running).rejects.toMatchObject({ name: 'AbortError' });
    await new Promise((r) => setTimeout(r, 100));
    expect(directory.requests).toHaveLength(1);
  });

  it('reports network errors and a missing configuration as error results', async () => {
    const closed = new FakeDirectory();
    const deadUrl = await closed.start();
    await closed.stop();
    const offline = await harness({ EXAMPLE_HTTP_BASE_URL: deadUrl, EXAMPLE_HTTP_RETRIES: '1' });
    const unconfigured = await ToolTestHarness.create([CustomerLookupModule]);
    try {
      const down = await offline.call('lookup_customer', { customerId: 'C-1' });
      expect(text(down.result)).toMatch(/after 2 attempt\(s\) \(last: network error ECONNREFUSED\)/);
      const none = await unconfigured.call('lookup_customer', { customerId: 'C-1' });
      expect(none.result).toMatchObject({ isError: true });
      expect(text(none.result)).toMatch(/not configured on this server/);
    } finally {
      await offline.close();
      await unconfigured.close();
    }
  });
});
