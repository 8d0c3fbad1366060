import { Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import pg from 'pg';
import { Counter } from 'prom-client';
import { DataSource, type EntityManager } from 'typeorm';
import { AppConfig } from '../config/app-config.js';
import { HealthService } from '../health/health.service.js';
import { InstancesService } from '../instances/instances.service.js';
import { MetricsService } from '../metrics/metrics.service.js';

export type BusHandler = (
  payload: Record<string, unknown>,
  meta: { fromInstance: string; self: boolean },
) => void;

/** NOTIFY payloads are limited to 8000 bytes; we send ids only, so anything near the limit is a bug. */
const MAX_PAYLOAD_BYTES = 7900;
const CHANNEL = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * Cross-instance signalling over PostgreSQL LISTEN/NOTIFY. Payloads carry ids only; state lives in tables,
 * so a receiver always re-reads it. A dedicated connection (outside the pool) holds the LISTENs and is
 * re-established with backoff when it drops; since notifications sent meanwhile are lost, subscribers get a
 * `resync` callback after every reconnect and re-read whatever they wait on.
 */
@Injectable()
export class PgBusService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(PgBusService.name);
  private client: pg.Client | undefined;
  private connected = false;
  private stopping = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private attempt = 0;
  private readonly handlers = new Map<string, Set<BusHandler>>();
  private readonly resyncHandlers = new Set<() => void>();
  private readonly reconnects: Counter<'result'>;
  private readonly published: Counter<'channel'>;

  constructor(
    private readonly config: AppConfig,
    private readonly dataSource: DataSource,
    private readonly instances: InstancesService,
    metrics: MetricsService,
    health: HealthService,
  ) {
    this.reconnects = new Counter({
      name: 'mcp_pg_listen_reconnects_total',
      help: 'Reconnections of the LISTEN connection, by result.',
      labelNames: ['result'] as const,
      registers: [metrics.registry],
    });
    this.published = new Counter({
      name: 'mcp_notifications_published_total',
      help: 'Cross-instance notifications published, by channel.',
      labelNames: ['channel'] as const,
      registers: [metrics.registry],
    });
    health.register('listener', async () =>
      this.connected ? { status: 'up' } : { status: 'down', reason: 'LISTEN connection is down' },
    );
  }

  async onModuleInit(): Promise<void> {
    await this.connect();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.reconnectTimer);
    const c = this.client;
    this.client = undefined;
    this.connected = false;
    await c?.end().catch(() => undefined);
  }

  get isConnected(): boolean {
    return this.connected;
  }

  /** Registers a handler for a channel; returns the function that removes it. */
  subscribe(channel: string, handler: BusHandler): () => void {
    if (!CHANNEL.test(channel)) throw new Error(`invalid bus channel name: ${channel}`);
    let set = this.handlers.get(channel);
    if (!set) {
      set = new Set();
      this.handlers.set(channel, set);
      // A failed LISTEN means a broken connection: its error handler reconnects and re-LISTENs everything.
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
   * Publishes now, or, given a transaction's EntityManager, at that transaction's commit (PostgreSQL
   * delivers NOTIFY only on commit and drops it on rollback), which is what state changes want.
   */
  async publish(channel: string, payload: Record<string, unknown>, manager?: EntityManager): Promise<void> {
    const text = JSON.stringify({ ...payload, _from: this.instances.instanceId });
    if (Buffer.byteLength(text) > MAX_PAYLOAD_BYTES) {
      throw new Error(`bus payload on ${channel} is ${Buffer.byteLength(text)} bytes; send ids, not state`);
    }
    const runner = manager ?? this.dataSource.manager;
    await runner.query('SELECT pg_notify($1, $2)', [channel, text]);
    this.published.inc({ channel });
  }

  private async connect(): Promise<void> {
    const url = this.config.DATABASE_URL;
    if (!url) throw new Error('DATABASE_URL is not resolved');
    const client = new pg.Client({ connectionString: url, application_name: 'mcp-task-server-listen' });
    client.on('notification', (msg) => this.dispatch(msg.channel, msg.payload));
    client.on('error', (err) => {
      this.logger.warn(`LISTEN connection error: ${err.message}`);
      this.lost(client);
    });
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      this.client = client;
      // Channel names are validated against CHANNEL, so quoting them as identifiers is safe.
      for (const channel of this.handlers.keys()) await client.query(`LISTEN "${channel}"`);
    } catch (err) {
      this.client = undefined;
      client.removeAllListeners('end');
      await client.end().catch(() => undefined);
      throw err;
    }
    this.connected = true;
    this.attempt = 0;
  }

  /** One query at a time on the LISTEN connection: pg does not queue concurrent ones for us forever. */
  private listenChain: Promise<unknown> = Promise.resolve();

  private listen(channel: string): Promise<void> {
    const next = this.listenChain.then(() => this.client?.query(`LISTEN "${channel}"`));
    this.listenChain = next.catch(() => undefined);
    return next.then(() => undefined);
  }

  private lost(client: pg.Client): void {
    if (this.stopping || this.client !== client) return;
    this.client = undefined;
    this.connected = false;
    client.removeAllListeners('end');
    void client.end().catch(() => undefined);
    this.reconnectSoon();
  }

  private reconnectSoon(): void {
    if (this.stopping) return;
    const delay = Math.min(10000, 200 * 2 ** this.attempt++);
    this.reconnectTimer = setTimeout(() => {
      this.connect().then(
        () => {
          this.reconnects.inc({ result: 'ok' });
          this.logger.log('LISTEN connection re-established');
          for (const h of this.resyncHandlers) h();
        },
        (err: unknown) => {
          this.reconnects.inc({ result: 'error' });
          this.logger.warn(`LISTEN reconnect failed: ${err instanceof Error ? err.message : String(err)}`);
          this.reconnectSoon();
        },
      );
    }, delay);
    this.reconnectTimer.unref();
  }

  private dispatch(channel: string, raw: string | undefined): void {
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
        this.logger.error(
          `bus handler on ${channel} failed: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
    }
  }
}
