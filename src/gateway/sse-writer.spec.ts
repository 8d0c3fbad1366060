import express, { type Response } from 'express';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SseWriter } from './sse-writer.js';

/** A real HTTP response whose client has already gone (aborted the request and closed the socket). */
async function responseOfGoneClient(): Promise<{ res: Response; server: http.Server }> {
  let resolveRes!: (res: Response) => void;
  const got = new Promise<Response>((r) => (resolveRes = r));
  const app = express();
  app.get('/', (_req, res) => resolveRes(res));
  let server!: http.Server;
  await new Promise<void>((r) => (server = app.listen(0, '127.0.0.1', () => r())));
  const { port } = server.address() as AddressInfo;
  const controller = new AbortController();
  const request = fetch(`http://127.0.0.1:${port}/`, { signal: controller.signal }).catch(() => null);
  const res = await got;
  const closed = new Promise((r) => res.once('close', r));
  controller.abort();
  await request;
  await closed;
  return { res, server };
}

describe('SseWriter', () => {
  it('on a response whose client already left: closed at once, close listeners run, no keep-alive timer', async () => {
    const { res, server } = await responseOfGoneClient();
    try {
      const timersBefore = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
      const writer = new SseWriter(res, 1000);
      expect(writer.isOpen).toBe(false);
      let ran = 0;
      writer.onClose(() => ran++);
      expect(ran).toBe(1);
      expect(process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length).toBe(timersBefore);
      writer.send({ jsonrpc: '2.0', method: 'x' }); // a no-op, not a write after end
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
