/**
 * Shared parts of the chaos tier (test/chaos/*.chaos-spec.ts): spawned server instances, clients that keep
 * listening across failures (reconnecting with Last-Event-ID, bounded), readiness sampling and the figures
 * each scenario prints. Everything runs on loopback; every loop is bounded in count and in time.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { MODERN, openStream, rpc, sessionHeaders, type SseEvent } from '../../support/mcp-http.js';
import { startServer, stopServer, type ServerProcess } from '../../support/server-process.js';
import { EXT_CAPS, rpcId } from '../../support/tasks-e2e.js';

export const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/** One figure line per measurement, with a prefix that is easy to grep out of CI logs. */
export function figure(scenario: string, name: string, value: number | string, unit = ''): void {
  process.stdout.write(`[chaos] ${scenario}: ${name} = ${value}${unit ? ` ${unit}` : ''}\n`);
}

/** Short intervals so that failures are detected in seconds (the same settings on every instance). */
export function chaosEnv(databaseUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    MCP_CONFORMANCE_FIXTURES: 'true',
    MRTR_STATE_SECRET: 'chaos-tier-shared-state-secret-0123456789',
    INSTANCE_HEARTBEAT_MS: '1000',
    TASK_LEASE_MS: '3000',
    JANITOR_INTERVAL_MS: '1000',
    TASK_POLL_INTERVAL_MS: '500',
    HEALTH_DB_TIMEOUT_MS: '1000',
    SHUTDOWN_GRACE_MS: '4000',
    ...extra,
  };
}

/** Starts instances one after the other (the first applies the migrations). */
export async function startInstances(n: number, env: Record<string, string>): Promise<ServerProcess[]> {
  const out: ServerProcess[] = [];
  for (let i = 0; i < n; i++) out.push(await startServer(env));
  return out;
}

/** Kills what is left; with CHAOS_LOG_DIR set, keeps every instance's full output there for a post-mortem. */
export async function stopAll(servers: ServerProcess[], label = 'chaos'): Promise<void> {
  await Promise.all(servers.map((s) => stopServer(s, 'SIGKILL')));
  const dir = process.env.CHAOS_LOG_DIR;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  for (const [i, s] of servers.entries()) writeFileSync(join(dir, `${label}-${i}.log`), s.output());
}

/** The last lines a server wrote, without its boot chatter, for a failure message. */
export function tail(server: ServerProcess, lines = 40): string {
  return server
    .output()
    .split('\n')
    .filter((l) => !/\[(InstanceLoader|RoutesResolver|RouterExplorer)\]/.test(l))
    .slice(-lines)
    .join('\n');
}

/** A task status as one stream or subscription told it, with the time it arrived. */
export interface Heard {
  taskId: string;
  status: string;
  at: number;
  params: any;
}

interface Feed {
  heard: Heard[];
  stop(): Promise<void>;
}

/** What a feed heard about one task, in arrival order. */
export function statusesOf(feed: Feed, taskId: string): string[] {
  return feed.heard.filter((h) => h.taskId === taskId).map((h) => h.status);
}

/** Waits (bounded) until the feed heard a status for the task that satisfies `match`. */
export async function heardWithin(
  feed: Feed,
  taskId: string,
  match: (status: string) => boolean,
  timeoutMs: number,
): Promise<Heard | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const h = feed.heard.find((x) => x.taskId === taskId && match(x.status));
    if (h || Date.now() > deadline) return h;
    await sleep(50);
  }
}

type StreamHandle = Awaited<ReturnType<typeof openStream>>;

/**
 * Reads one stream until stopped; when the stream ends or cannot be opened (instance gone, database down),
 * opens it again from `url()` after a short pause, at most `maxOpens` times in all.
 */
abstract class ReconnectingFeed implements Feed {
  readonly heard: Heard[] = [];
  /** Every open attempt's outcome: an HTTP status, or the network error's message. */
  readonly opens: (number | string)[] = [];
  private stopped = false;
  private current: StreamHandle | undefined;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly url: () => string,
    private readonly maxOpens = 300,
  ) {}

  protected abstract open(url: string): Promise<StreamHandle>;
  protected abstract onEvent(ev: SseEvent): void;

  /** Starts reading; resolves once the first stream is open and answered (or failed to open). */
  async start(): Promise<void> {
    let first!: () => void;
    const opened = new Promise<void>((r) => (first = r));
    this.loop = this.run(first);
    await opened;
  }

  private async run(first: () => void): Promise<void> {
    while (!this.stopped && this.opens.length < this.maxOpens) {
      let stream: StreamHandle | undefined;
      try {
        stream = await this.open(this.url());
        this.opens.push(stream.status);
      } catch (err) {
        this.opens.push(err instanceof Error ? err.message : String(err));
      }
      first();
      if (stream && stream.status === 200) {
        this.current = stream;
        try {
          while (!this.stopped) {
            const ev = await stream.next(500).catch((err: Error) => {
              if (err.message === 'no SSE event in time') return undefined;
              throw err;
            });
            if (ev) this.onEvent(ev);
          }
        } catch {
          // the stream ended or broke: open it again below
        }
        this.current = undefined;
      }
      stream?.close();
      if (!this.stopped) await sleep(200);
    }
  }

  /** How many times the feed had to open its stream again after the first time. */
  get reopened(): number {
    return Math.max(0, this.opens.filter((o) => o === 200).length - 1);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.current?.close();
    await this.loop;
  }
}

/**
 * The legacy session's GET stream: `notifications/tasks/status`, resumed with Last-Event-ID so that
 * nothing logged while it was away is skipped.
 */
export class SessionFeed extends ReconnectingFeed {
  lastEventId: string | undefined;

  constructor(
    readonly sessionId: string,
    url: () => string,
  ) {
    super(url);
  }

  protected open(url: string): Promise<StreamHandle> {
    return openStream(url, {
      method: 'GET',
      headers: {
        accept: 'text/event-stream',
        ...sessionHeaders(this.sessionId),
        ...(this.lastEventId ? { 'last-event-id': this.lastEventId } : {}),
      },
    });
  }

  protected onEvent(ev: SseEvent): void {
    if (ev.id) this.lastEventId = ev.id;
    if (ev.json?.method !== 'notifications/tasks/status') return;
    const p = ev.json.params;
    this.heard.push({ taskId: p.taskId, status: p.status, at: Date.now(), params: p });
  }
}

/**
 * A 2026-07-28 `subscriptions/listen` on fixed task ids: `notifications/tasks`. A subscription has no
 * replay; when it breaks it is opened again, and the reopen count is part of what the scenario reports.
 */
export class SubscriptionFeed extends ReconnectingFeed {
  acknowledged = 0;

  constructor(
    readonly taskIds: string[],
    url: () => string,
  ) {
    super(url);
  }

  protected open(url: string): Promise<StreamHandle> {
    return openStream(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN,
        'mcp-method': 'subscriptions/listen',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: rpcId(),
        method: 'subscriptions/listen',
        params: {
          notifications: { taskIds: this.taskIds },
          _meta: {
            'io.modelcontextprotocol/protocolVersion': MODERN,
            'io.modelcontextprotocol/clientCapabilities': EXT_CAPS,
            'io.modelcontextprotocol/clientInfo': { name: 'chaos', version: '1.0.0' },
          },
        },
      }),
    });
  }

  protected onEvent(ev: SseEvent): void {
    if (ev.json?.method === 'notifications/subscriptions/acknowledged') this.acknowledged++;
    if (ev.json?.method !== 'notifications/tasks') return;
    const p = ev.json.params;
    this.heard.push({ taskId: p.taskId, status: p.status, at: Date.now(), params: p });
  }
}

/** Samples GET /health/ready of one instance until stopped (every `everyMs`, at most `max` samples). */
export class ReadinessProbe {
  readonly samples: { at: number; status: number }[] = [];
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(
    readonly baseUrl: string,
    everyMs = 100,
    max = 3000,
  ) {
    this.loop = (async () => {
      while (!this.stopped && this.samples.length < max) {
        let status = 0;
        try {
          const res = await fetch(`${baseUrl}/health/ready`, { signal: AbortSignal.timeout(3000) });
          status = res.status;
          await res.arrayBuffer();
        } catch {
          status = 0; // no answer at all
        }
        this.samples.push({ at: Date.now(), status });
        await sleep(everyMs);
      }
    })();
  }

  /** First sample at or after `since` with the given status. */
  firstAfter(since: number, status: number): { at: number; status: number } | undefined {
    return this.samples.find((s) => s.at >= since && s.status === status);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}

/** A JSON-RPC request to a session, answered or not: the HTTP status (0 when the connection failed). */
export async function legacyCall(
  url: string,
  sessionId: string,
  method: string,
  params: Record<string, unknown>,
): Promise<{ status: number; response?: any; error?: string; retryAfter?: string }> {
  try {
    const a = await rpc(url, { jsonrpc: '2.0', id: rpcId(), method, params }, sessionHeaders(sessionId));
    const response =
      a.json ??
      [...a.events].reverse().find((e) => e.json && ('result' in e.json || 'error' in e.json))?.json;
    return { status: a.status, response, retryAfter: a.headers.get('retry-after') ?? undefined };
  } catch (err) {
    return { status: 0, error: err instanceof Error ? err.message : String(err) };
  }
}

/** Polls a condition, bounded by count and time; returns the last value read. */
export async function pollUntil<T>(
  read: () => Promise<T>,
  done: (v: T) => boolean,
  timeoutMs: number,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  const maxRounds = Math.ceil(timeoutMs / everyMs) + 1;
  let last = await read();
  for (let i = 0; i < maxRounds && !done(last) && Date.now() < deadline; i++) {
    await sleep(everyMs);
    last = await read();
  }
  return last;
}

/** /health/ready's status code, 0 while nothing answers. */
export async function readiness(server: ServerProcess): Promise<number> {
  return fetch(`${server.baseUrl}/health/ready`).then(
    (r) => r.status,
    () => 0,
  );
}
