import { request as httpRequest, type Agent, type OutgoingHttpHeaders } from 'node:http';

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
  options: { agent?: Agent; localAddress?: string } = {},
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
