/** Shared helpers of the tasks e2e suites (test/e2e/tasks-*.e2e-spec.ts): both eras over raw HTTP. */
import { randomBytes } from 'node:crypto';
import {
  modernCall,
  openSession,
  openStream,
  responseOf,
  rpc,
  sessionHeaders,
  type RpcAnswer,
  type SseEvent,
} from './mcp-http.js';

export const TASKS_EXT = 'io.modelcontextprotocol/tasks';
export const RELATED_TASK = 'io.modelcontextprotocol/related-task';
export const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
export const EXT_CAPS = { extensions: { [TASKS_EXT]: {} } };
export const PROXY_SECRET = 'proxy-secret-for-tasks-e2e-0123';

/** Identity headers of a user behind the trusted SSO proxy (AUTH_PROVIDERS=proxy). */
export function asUser(user: string): Record<string, string> {
  return { 'x-forwarded-user': user, 'x-auth-proxy-secret': PROXY_SECRET };
}

/** A user name no other test uses, so every test starts with no tasks. */
export function freshUser(prefix = 'user'): string {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}

let nextId = 1000;
export function rpcId(): number {
  return nextId++;
}

/** A legacy client bound to one session (and optionally one proxied user). */
export class LegacyClient {
  private constructor(
    readonly url: string,
    readonly sessionId: string,
    readonly identity: Record<string, string>,
  ) {}

  static async open(
    url: string,
    capabilities: Record<string, unknown> = {},
    identity: Record<string, string> = {},
  ): Promise<LegacyClient> {
    return new LegacyClient(url, await openSession(url, capabilities, identity), identity);
  }

  /** The same session (and identity) sent to another server instance. */
  at(url: string): LegacyClient {
    return new LegacyClient(url, this.sessionId, this.identity);
  }

  headers(): Record<string, string> {
    return sessionHeaders(this.sessionId, this.identity);
  }

  /** Sends a request and returns the whole HTTP answer. */
  async send(method: string, params: Record<string, unknown> = {}): Promise<RpcAnswer> {
    return rpc(this.url, { jsonrpc: '2.0', id: rpcId(), method, params }, this.headers());
  }

  /** Sends a request and returns its JSON-RPC response ({result} or {error}). */
  async call(method: string, params: Record<string, unknown> = {}): Promise<any> {
    const answer = await this.send(method, params);
    const response = responseOf(answer);
    if (!response) throw new Error(`no JSON-RPC response to ${method}: ${answer.status} ${answer.text}`);
    return response;
  }

  /** Like call, but fails unless the response is a result. */
  async result(method: string, params: Record<string, unknown> = {}): Promise<any> {
    const response = await this.call(method, params);
    if (!('result' in response)) throw new Error(`${method} failed: ${JSON.stringify(response.error)}`);
    return response.result;
  }

  /** tools/call with params.task; returns the task handle. */
  async createTask(name: string, args: Record<string, unknown> = {}, task: Record<string, unknown> = {}) {
    const result = await this.result('tools/call', { name, arguments: args, task });
    if (!result.task) throw new Error(`tools/call ${name} returned no task: ${JSON.stringify(result)}`);
    return result.task as {
      taskId: string;
      status: string;
      createdAt: string;
      ttl: number;
      pollInterval: number;
    };
  }

  /** The session's own GET stream, read event by event. */
  openGetStream(lastEventId?: string) {
    return openStream(this.url, {
      method: 'GET',
      headers: {
        accept: 'text/event-stream',
        ...this.headers(),
        ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
      },
    });
  }
}

/** A 2026-07-28 request; `ext` declares the tasks extension in this request's capabilities. */
export async function modern(
  url: string,
  method: string,
  params: Record<string, unknown> = {},
  opts: {
    ext?: boolean;
    caps?: Record<string, unknown>;
    name?: string;
    headers?: Record<string, string>;
  } = {},
): Promise<RpcAnswer> {
  const caps = { ...(opts.caps ?? {}), ...(opts.ext === false ? {} : EXT_CAPS) };
  const name = opts.name ?? (typeof params.taskId === 'string' ? params.taskId : (params.name as string));
  if (!opts.headers) return modernCall(url, rpcId(), method, params, { caps, name });
  const body = {
    jsonrpc: '2.0',
    id: rpcId(),
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': caps,
        'io.modelcontextprotocol/clientInfo': { name: 'tasks-e2e', version: '1.0.0' },
      },
    },
  };
  return rpc(url, body, {
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': method,
    ...(name !== undefined ? { 'mcp-name': name } : {}),
    ...opts.headers,
  });
}

/**
 * The fetch init of a 2026-07-28 `subscriptions/listen` by a proxy-authenticated user, with the tasks extension
 * declared; `padding` adds that many bytes to `_meta` (bodies of a chosen size), `id` fixes the request id.
 */
export function listenInit(
  user: string,
  notifications: Record<string, unknown>,
  opts: { padding?: number; id?: string | number } = {},
): RequestInit {
  return {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'subscriptions/listen',
      ...asUser(user),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: opts.id ?? rpcId(),
      method: 'subscriptions/listen',
      params: {
        notifications,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientCapabilities': EXT_CAPS,
          'io.modelcontextprotocol/clientInfo': { name: 'tasks-e2e', version: '1.0.0' },
          ...(opts.padding ? { padding: 'p'.repeat(opts.padding) } : {}),
        },
      },
    }),
  };
}

/** Polls `read` until `done` holds for its value (or fails after `timeoutMs`). */
export async function waitFor<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  { timeoutMs = 15000, intervalMs = 50, what = 'condition' } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T;
  for (;;) {
    last = await read();
    if (done(last)) return last;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Reads events until one satisfies `match`; returns it and everything read on the way. */
export async function nextMatching(
  stream: { next(timeoutMs?: number): Promise<SseEvent> },
  match: (ev: SseEvent) => boolean,
  timeoutMs = 10000,
): Promise<{ event: SseEvent; seen: SseEvent[] }> {
  const deadline = Date.now() + timeoutMs;
  const seen: SseEvent[] = [];
  for (;;) {
    const ev = await stream.next(Math.max(1, deadline - Date.now()));
    seen.push(ev);
    if (match(ev)) return { event: ev, seen };
  }
}
