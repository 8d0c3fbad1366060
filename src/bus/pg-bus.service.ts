import { Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Counter, Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import type { SqlTx } from '../database/sql-transaction.js';
import { HealthService } from '../health/health.service.js';
import { InstancesService } from '../instances/instances.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { errorMessage } from '../common/error-message.js';
import { DatabaseConfig } from '../database/database.config.js';
import { BusConfig } from './bus.config.js';

export type BusHandler = (
  payload: Record<string, unknown>,
  meta: { fromInstance: string; self: boolean },
) => void;

/** NOTIFY payloads are limited to 8000 bytes; we send ids only, so anything near the limit is a bug. */
const MAX_PAYLOAD_BYTES = 7900;
const CHANNEL = /^[a-z_][a-z0-9_]{0,62}$/;

/** Least time a new LISTEN connection gets to connect and LISTEN before the attempt counts as failed. */
const SETUP_TIMEOUT_FLOOR_MS = 10000;

/** application_name of every LISTEN connection; the instance id follows it, so operators can tell them apart. */
export const LISTEN_APPLICATION_PREFIX = 'mcp-task-server-listen:';

async function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Cross-instance signalling over PostgreSQL LISTEN/NOTIFY. Payloads carry ids only; state lives in tables,
 * so a receiver always re-reads it. A dedicated connection (outside the pool) holds the LISTENs.
 *
 * Liveness: the connection has TCP keepalive, and every BUS_HEARTBEAT_MS it NOTIFYs a channel only it
 * listens to and waits for that notification to come back; a round trip that fails or exceeds
 * BUS_HEARTBEAT_TIMEOUT_MS (a half-open connection, a stuck server) marks readiness down, tears the
 * connection down and reconnects. Exactly one reconnect loop runs at a time, whatever mix of error, end and
 * failed heartbeat announced the loss. Notifications sent while it was down are lost, so subscribers get a
 * `resync` callback after every reconnect and re-read whatever they wait on from the tables.
 */
@Injectable()
export class PgBusService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(PgBusService.name);
  private client: pg.Client | undefined;
  private connected = false;
  private stopping = false;
  /** True from the moment a loss is noticed until a new connection is up: the one reconnect loop. */
  private reconnecting = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private attempt = 0;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private heartbeatFailed: string | undefined;
  private beating = false;
  private readonly heartbeatWaiters = new Map<string, () => void>();
  private readonly heartbeatChannel: string;
  private readonly handlers = new Map<string, Set<BusHandler>>();
  private readonly resyncHandlers = new Set<() => void>();
  private readonly reconnects: Counter<'result'>;
  private readonly heartbeatFailures: Counter;
  private readonly published: Counter<'channel'>;

  constructor(
    private readonly config: BusConfig,
    private readonly databaseConfig: DatabaseConfig,
    private readonly dataSource: DataSource,
    private readonly instances: InstancesService,
    metrics: MetricsService,
    health: HealthService,
  ) {
    this.heartbeatChannel = `mcp_bus_hb_${instances.instanceId.replace(/-/g, '')}`;
    this.reconnects = new Counter({
      name: 'mcp_bus_reconnects_total',
      help: 'Reconnection attempts of the LISTEN connection, by result (ok, error).',
      labelNames: ['result'] as const,
      registers: [metrics.registry],
    });
    this.heartbeatFailures = new Counter({
      name: 'mcp_bus_heartbeat_failures_total',
      help: 'Self-NOTIFY round trips on the LISTEN connection that failed or timed out.',
      registers: [metrics.registry],
    });
    const up: Gauge = new Gauge({
      name: 'mcp_bus_listener_up',
      help: '1 while the LISTEN connection is connected and its last heartbeat succeeded.',
      registers: [metrics.registry],
      collect: () => up.set(this.isHealthy ? 1 : 0),
    });
    // Both series exist from the start, so rate() and increase() see the first reconnect.
    for (const result of ['ok', 'error']) this.reconnects.inc({ result }, 0);
    this.published = new Counter({
      name: 'mcp_notifications_published_total',
      help: 'Cross-instance notifications published, by channel.',
      labelNames: ['channel'] as const,
      registers: [metrics.registry],
    });
    health.register(
      'listener',
      async () => {
        if (!this.connected) return { status: 'down', reason: 'LISTEN connection is down' };
        if (this.heartbeatFailed) return { status: 'down', reason: this.heartbeatFailed };
        return { status: 'up' };
      },
      { live: true }, // in-memory state: a reconnect or a failed heartbeat shows in the very next probe
    );
  }

  async onModuleInit(): Promise<void> {
    await this.establish();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.reconnectTimer);
    clearInterval(this.heartbeatTimer);
    const c = this.client;
    this.client = undefined;
    this.connected = false;
    if (c) {
      c.removeAllListeners('end');
      await c.end().catch(() => undefined);
    }
  }

  get isConnected(): boolean {
    return this.connected;
  }

  /** Connected, and the last heartbeat round trip (if any since connecting) succeeded. */
  get isHealthy(): boolean {
    return this.connected && !this.heartbeatFailed;
  }

  /** The instance's LISTEN connection's application_name (tests find its backend by it). */
  get applicationName(): string {
    return `${LISTEN_APPLICATION_PREFIX}${this.instances.instanceId}`;
  }

  /** Registers a handler for a channel; returns the function that removes it. */
  subscribe(channel: string, handler: BusHandler): () => void {
    if (!CHANNEL.test(channel)) throw new Error(`invalid bus channel name: ${channel}`);
    let set = this.handlers.get(channel);
    if (!set) {
      set = new Set();
      this.handlers.set(channel, set);
      // A failed LISTEN means a broken connection: its loss handling reconnects and re-LISTENs everything.
      if (this.connected)
        this.listen(channel).catch((err: unknown) =>
          this.logger.warn(`LISTEN ${channel} failed: ${String(err)}`),
        );
    }
    set.add(handler);
    return () => {
      set.delete(handler);
    };
  }

  /** Handlers registered on a channel (diagnostics and leak tests). */
  handlerCount(channel: string): number {
    return this.handlers.get(channel)?.size ?? 0;
  }

  /** Resolves once every LISTEN asked for so far is in place (a publish after it is sure to be heard). */
  async listening(): Promise<void> {
    await this.listenChain;
  }

  /** Called after the LISTEN connection came back: notifications may have been missed meanwhile. */
  onResync(handler: () => void): () => void {
    this.resyncHandlers.add(handler);
    return () => this.resyncHandlers.delete(handler);
  }

  /**
   * Publishes now, or, given a transaction, at that transaction's commit (the NOTIFY rides with COMMIT and
   * PostgreSQL drops it on rollback), which is what state changes want.
   */
  async publish(channel: string, payload: Record<string, unknown>, tx?: SqlTx): Promise<void> {
    const text = JSON.stringify({ ...payload, _from: this.instances.instanceId });
    if (Buffer.byteLength(text) > MAX_PAYLOAD_BYTES) {
      throw new Error(`bus payload on ${channel} is ${Buffer.byteLength(text)} bytes; send ids, not state`);
    }
    if (tx) tx.notifyOnCommit(channel, text);
    else await this.dataSource.query('SELECT pg_notify($1, $2)', [channel, text]);
    this.published.inc({ channel });
  }

  /**
   * One heartbeat now: NOTIFY on the private channel through the LISTEN connection itself and wait for it
   * to come back. On failure, readiness drops and the connection is replaced. Runs every BUS_HEARTBEAT_MS.
   */
  async heartbeat(): Promise<boolean> {
    const client = this.client;
    if (!client || !this.connected || this.beating) return false;
    this.beating = true;
    const nonce = randomUUID();
    const heard = new Promise<void>((resolve) => this.heartbeatWaiters.set(nonce, resolve));
    try {
      await withTimeout(
        Promise.all([client.query('SELECT pg_notify($1, $2)', [this.heartbeatChannel, nonce]), heard]),
        this.config.BUS_HEARTBEAT_TIMEOUT_MS,
        'LISTEN heartbeat',
      );
      if (this.client === client) this.heartbeatFailed = undefined;
      return true;
    } catch (err) {
      if (this.client !== client) return false; // already replaced; not this connection's failure to report
      this.heartbeatFailures.inc();
      const reason = `LISTEN heartbeat failed: ${errorMessage(err)}`;
      this.heartbeatFailed = reason;
      this.lost(client, reason);
      return false;
    } finally {
      this.heartbeatWaiters.delete(nonce);
      this.beating = false;
    }
  }

  /**
   * Opens a LISTEN connection and LISTENs every channel. Any failure rejects; a loss noticed while it runs
   * only tears the half-made connection down (the caller, boot or the reconnect loop, decides what next).
   */
  private async establish(): Promise<void> {
    const url = this.config.DATABASE_LISTEN_URL ?? this.databaseConfig.DATABASE_URL;
    if (!url) throw new Error('DATABASE_URL is not resolved');
    // Setting up takes more round trips than a heartbeat (and happens when the server may be busy recovering).
    const timeoutMs = Math.max(SETUP_TIMEOUT_FLOOR_MS, this.config.BUS_HEARTBEAT_TIMEOUT_MS);
    const client = new pg.Client({
      connectionString: url,
      application_name: this.applicationName,
      keepAlive: true,
      keepAliveInitialDelayMillis: this.config.BUS_TCP_KEEPALIVE_MS,
      connectionTimeoutMillis: timeoutMs,
    });
    client.on('notification', (msg) => this.dispatch(msg.channel, msg.payload));
    client.on('error', (err) => this.lost(client, `LISTEN connection error: ${err.message}`));
    client.on('end', () => this.lost(client, 'LISTEN connection ended'));
    this.client = client;
    try {
      await withTimeout(
        (async () => {
          await client.connect();
          await client.query(`LISTEN "${this.heartbeatChannel}"`);
          // Channel names are validated against CHANNEL, so quoting them as identifiers is safe.
          for (const channel of this.handlers.keys()) await client.query(`LISTEN "${channel}"`);
        })(),
        timeoutMs,
        'LISTEN connection setup',
      );
      if (this.client !== client) throw new Error('LISTEN connection lost while it was set up');
    } catch (err) {
      this.lost(client, errorMessage(err));
      throw err;
    }
    this.connected = true;
    this.heartbeatFailed = undefined;
    this.attempt = 0;
    clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), this.config.BUS_HEARTBEAT_MS);
    this.heartbeatTimer.unref();
  }

  /** One query at a time on the LISTEN connection: pg does not queue concurrent ones for us forever. */
  private listenChain: Promise<unknown> = Promise.resolve();

  private listen(channel: string): Promise<void> {
    const next = this.listenChain.then(() => this.client?.query(`LISTEN "${channel}"`));
    this.listenChain = next.catch(() => undefined);
    return next.then(() => undefined);
  }

  /**
   * The connection `client` is gone or unusable (error, end, failed heartbeat, failed setup). Idempotent per
   * connection: only the first report for the current connection acts. A connection that was up starts
   * the reconnect loop; one still being set up is left to its establish() caller.
   */
  private lost(client: pg.Client, reason: string): void {
    if (this.stopping || this.client !== client) return;
    const wasUp = this.connected;
    this.client = undefined;
    this.connected = false;
    clearInterval(this.heartbeatTimer);
    client.removeAllListeners('notification');
    client.removeAllListeners('end');
    client.removeAllListeners('error');
    client.on('error', () => undefined); // late errors of a discarded connection are expected
    void client.end().catch(() => undefined);
    // A half-open socket may never answer end(): drop it now.
    (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    if (wasUp) {
      this.logger.warn(`${reason}; reconnecting`);
      this.reconnectLoop();
    }
  }

  /** Starts the reconnect loop unless one is running: retries with backoff until a connection is up. */
  private reconnectLoop(): void {
    if (this.stopping || this.reconnecting) return;
    this.reconnecting = true;
    const tryAgain = (): void => {
      if (this.stopping) {
        this.reconnecting = false;
        return;
      }
      const delay = Math.min(10000, 200 * 2 ** this.attempt++);
      this.reconnectTimer = setTimeout(() => {
        this.establish().then(
          () => {
            this.reconnecting = false;
            this.reconnects.inc({ result: 'ok' });
            this.logger.log('LISTEN connection re-established');
            for (const h of this.resyncHandlers) h();
          },
          (err: unknown) => {
            this.reconnects.inc({ result: 'error' });
            this.logger.warn(`LISTEN reconnect failed: ${errorMessage(err)}`);
            tryAgain();
          },
        );
      }, delay);
      this.reconnectTimer.unref();
    };
    tryAgain();
  }

  private dispatch(channel: string, raw: string | undefined): void {
    if (channel === this.heartbeatChannel) {
      if (raw) this.heartbeatWaiters.get(raw)?.();
      return;
    }
    const set = this.handlers.get(channel);
    if (!set || set.size === 0 || !raw) return;
    let payload: Record<string, unknown>;
    try {
      payload = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      this.logger.warn(`ignoring malformed notification on ${channel}`);
      return;
    }
    const fromInstance = typeof payload._from === 'string' ? payload._from : '';
    delete payload._from;
    const meta = { fromInstance, self: fromInstance === this.instances.instanceId };
    for (const h of set) {
      try {
        h(payload, meta);
      } catch (err) {
        this.logger.error(`bus handler on ${channel} failed: ${errorMessage(err)}`);
      }
    }
  }
}
