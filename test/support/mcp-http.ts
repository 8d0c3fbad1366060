/** Raw Streamable HTTP for e2e tests: JSON or SSE answers, parsed; streams readable event by event. */

export interface SseEvent {
  id?: string;
  event?: string;
  retry?: number;
  data: string;
  json?: any;
}

export interface RpcAnswer {
  status: number;
  headers: Headers;
  json?: any;
  events: SseEvent[];
  text: string;
}

export const MODERN = '2026-07-28';
export const LEGACY = '2025-11-25';

export function parseSse(text: string): SseEvent[] {
  const events: SseEvent[] = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    if (block.trim() === '') continue;
    const ev: SseEvent = { data: '' };
    const data: string[] = [];
    let sawField = false;
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith(':')) continue;
      const idx = line.indexOf(':');
      const field = idx === -1 ? line : line.slice(0, idx);
      const value = idx === -1 ? '' : line.slice(idx + 1).replace(/^ /, '');
      sawField = true;
      if (field === 'id') ev.id = value;
      else if (field === 'event') ev.event = value;
      else if (field === 'retry') ev.retry = Number(value);
      else if (field === 'data') data.push(value);
    }
    if (!sawField) continue;
    ev.data = data.join('\n');
    if (ev.data.trim() !== '') ev.json = JSON.parse(ev.data);
    events.push(ev);
  }
  return events;
}

export async function rpc(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
  method = 'POST',
): Promise<RpcAnswer> {
  const res = await fetch(url, {
    method,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: method === 'POST' ? (typeof body === 'string' ? body : JSON.stringify(body)) : undefined,
  });
  const text = await res.text();
  const type = res.headers.get('content-type') ?? '';
  const answer: RpcAnswer = { status: res.status, headers: res.headers, events: [], text };
  if (type.includes('text/event-stream')) answer.events = parseSse(text);
  else if (type.includes('application/json') && text) answer.json = JSON.parse(text);
  return answer;
}

/** The JSON-RPC response in an answer, whether it came as JSON or as the last SSE message. */
export function responseOf(a: RpcAnswer): any {
  if (a.json) return a.json;
  return [...a.events].reverse().find((e) => e.json && ('result' in e.json || 'error' in e.json))?.json;
}

export function modernMeta(
  caps: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': caps,
    'io.modelcontextprotocol/clientInfo': { name: 'e2e', version: '1.0.0' },
    ...extra,
  };
}

export function modernHeaders(method: string, name?: string): Record<string, string> {
  return {
    'mcp-protocol-version': MODERN,
    'mcp-method': method,
    ...(name !== undefined ? { 'mcp-name': name } : {}),
  };
}

/** A modern request: body and matching headers. */
export async function modernCall(
  url: string,
  id: number | string,
  method: string,
  params: Record<string, unknown> = {},
  opts: {
    caps?: Record<string, unknown>;
    name?: string;
    meta?: Record<string, unknown>;
    headers?: Record<string, string>;
  } = {},
): Promise<RpcAnswer> {
  const body = {
    jsonrpc: '2.0',
    id,
    method,
    params: { ...params, _meta: modernMeta(opts.caps ?? {}, opts.meta) },
  };
  return rpc(url, body, { ...modernHeaders(method, opts.name), ...opts.headers });
}

/** Opens a legacy session with initialize + notifications/initialized; returns its id. */
export async function openSession(
  url: string,
  capabilities: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Promise<string> {
  const init = await rpc(
    url,
    {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: LEGACY, capabilities, clientInfo: { name: 'e2e', version: '1.0.0' } },
    },
    headers,
  );
  if (init.status !== 200) throw new Error(`initialize failed: ${init.status} ${init.text}`);
  const id = init.headers.get('mcp-session-id');
  if (!id) throw new Error('no session id');
  const ack = await rpc(
    url,
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    sessionHeaders(id, headers),
  );
  if (ack.status !== 202) throw new Error(`initialized got ${ack.status}`);
  return id;
}

export function sessionHeaders(
  sessionId: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return { 'mcp-session-id': sessionId, 'mcp-protocol-version': LEGACY, ...extra };
}

/**
 * Reads an SSE response event by event. `next()` resolves with the next event (comments skipped);
 * `close()` drops the connection, as a client losing its network would.
 */
export async function openStream(
  url: string,
  init: RequestInit,
): Promise<{ status: number; headers: Headers; next(timeoutMs?: number): Promise<SseEvent>; close(): void }> {
  const controller = new AbortController();
  const res = await fetch(url, { ...init, signal: controller.signal });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const queue: SseEvent[] = [];
  let pending: ReturnType<typeof reader.read> | undefined;
  return {
    status: res.status,
    headers: res.headers,
    close: () => controller.abort(),
    async next(timeoutMs = 10000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (queue.length > 0) return queue.shift()!;
        const sep = buffer.search(/\r?\n\r?\n/);
        if (sep !== -1) {
          const block = buffer.slice(0, sep);
          buffer = buffer.slice(sep).replace(/^\r?\n\r?\n/, '');
          queue.push(...parseSse(block + '\n\n'));
          continue;
        }
        if (Date.now() > deadline) throw new Error('no SSE event in time');
        // A read that outlives a timed-out next() is kept for the next call, so no chunk is ever lost.
        pending ??= reader.read();
        let timer: NodeJS.Timeout | undefined;
        const chunk = await Promise.race([
          pending,
          new Promise<never>((_, reject) => {
            timer = setTimeout(
              () => reject(new Error('no SSE event in time')),
              Math.max(1, deadline - Date.now()),
            );
          }),
        ]).finally(() => clearTimeout(timer));
        pending = undefined;
        if (chunk.done) throw new Error('stream ended');
        buffer += decoder.decode(chunk.value, { stream: true });
      }
    },
  };
}
