import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { randomBytes, randomUUID } from 'node:crypto';
import { PgBusService } from '../bus/pg-bus.service.js';
import { InstancesService } from '../instances/instances.service.js';
import type { Principal } from '../principals/principal.js';
import { QuotaService } from '../quotas/quota.service.js';
import { ClientResponsesRepository } from './client-responses.repository.js';
import type { McpSession } from './session.entity.js';
import { SessionError, SessionErrorCode } from './sessions.errors.js';
import { SessionsRepository, type SessionEndReason } from './sessions.repository.js';
import { SseEventsRepository } from './sse-events.repository.js';
import { errorMessage } from '../common/error-message.js';
import { isDatabaseUnavailable } from '../common/internal-fault.js';
import { BusConfig } from '../bus/bus.config.js';
import { QuotasConfig } from '../quotas/quotas.config.js';
import { SessionsConfig } from './sessions.config.js';

const TOUCH_INTERVAL_MS = 5000;
const SWEEP_INTERVAL_MS = 60000;

/** Any instance that changes or ends a session says so here; `a` asks the others to acknowledge. */
export const SESSION_CHANNEL = 'mcp_session_changed';
/** Acknowledgements of a session invalidation ({ a: nonce }), from each instance that dropped it. */
export const SESSION_ACK_CHANNEL = 'mcp_session_ack';

interface CachedSession {
  session: McpSession;
  /** performance.now() when the database last confirmed the session live (and touched it if due). */
  verifiedAt: number;
}

@Injectable()
export class SessionsService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(SessionsService.name);
  private sweeper: NodeJS.Timeout | undefined;
  /**
   * Live sessions this instance served lately, by id (insertion order = age, for eviction). Every session
   * change or end is published on SESSION_CHANNEL and drops the entry on every instance; ending one waits
   * for every other live instance to acknowledge, so a DELETE answered anywhere is a 404 everywhere next.
   */
  private readonly cache = new Map<string, CachedSession>();
  /** Bumped by every invalidation: a read that overlapped one does not fill the cache. */
  private invalidations = 0;
  private readonly ackWaiters = new Map<string, (from: string) => void>();
  private readonly offBus: (() => void)[] = [];

  constructor(
    private readonly sessions: SessionsRepository,
    private readonly events: SseEventsRepository,
    private readonly responses: ClientResponsesRepository,
    private readonly config: SessionsConfig,
    private readonly quotasConfig: QuotasConfig,
    private readonly busConfig: BusConfig,
    private readonly quotas: QuotaService,
    private readonly bus: PgBusService,
    private readonly instances: InstancesService,
  ) {
    this.offBus.push(
      this.bus.subscribe(SESSION_CHANNEL, (payload, meta) => {
        if (typeof payload.s !== 'string') return;
        this.drop(payload.s);
        if (typeof payload.a === 'string' && !meta.self) {
          void this.bus.publish(SESSION_ACK_CHANNEL, { a: payload.a }).catch(() => undefined);
        }
      }),
      this.bus.subscribe(SESSION_ACK_CHANNEL, (payload, meta) => {
        if (typeof payload.a === 'string') this.ackWaiters.get(payload.a)?.(meta.fromInstance);
      }),
      // Invalidations may have been missed while the LISTEN connection was down.
      this.bus.onResync(() => this.dropAll()),
    );
  }

  onApplicationBootstrap(): void {
    this.sweeper = setInterval(() => {
      this.sweep().catch((err: unknown) => this.logger.warn(`session sweep failed: ${errorMessage(err)}`));
    }, SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  onApplicationShutdown(): void {
    clearInterval(this.sweeper);
    for (const off of this.offBus) off();
  }

  /**
   * 192 random bits, base64url: visible ASCII, unguessable. Never starting with `-` (drawn again, one id
   * in 64), so an id pasted after a command (`sessions end ID`) is never read as an option.
   */
  static newId(): string {
    for (;;) {
      const id = randomBytes(24).toString('base64url');
      if (id[0] !== '-') return id;
    }
  }

  async open(
    principal: Principal,
    protocolVersion: string,
    clientCapabilities: Record<string, unknown>,
    clientInfo: Record<string, unknown> | null,
  ): Promise<McpSession> {
    const max = this.quotasConfig.QUOTA_SESSIONS_PER_PRINCIPAL;
    const session = await this.sessions.createWithin(
      {
        id: SessionsService.newId(),
        principalId: principal.id,
        protocolVersion,
        clientCapabilities,
        clientInfo,
      },
      max,
      new Date(Date.now() - this.config.SESSION_IDLE_TTL_MS),
    );
    if (!session) {
      throw this.quotas.refuse(
        'sessions',
        `Too many live sessions for this caller (QUOTA_SESSIONS_PER_PRINCIPAL = ${max}); end one with DELETE`,
        max,
        'QUOTA_SESSIONS_PER_PRINCIPAL',
        429,
      );
    }
    return session;
  }

  /**
   * The live session for this principal, or SESSION_NOT_FOUND. Refreshes its idle timer. Served from memory
   * when this instance confirmed it live within TOUCH_INTERVAL_MS and has heard of no change since (and its
   * LISTEN connection is healthy, so it would have heard); otherwise read from the database.
   */
  async resolve(id: string, principal: Principal): Promise<McpSession> {
    const hit = this.cacheUsable() ? this.cache.get(id) : undefined;
    if (hit && hit.session.principalId === principal.id) {
      if (performance.now() - hit.verifiedAt < TOUCH_INTERVAL_MS) return hit.session;
      this.cache.delete(id);
    }
    const epoch = this.invalidations;
    const live = await this.sessions.findLive(
      id,
      principal.id,
      this.config.SESSION_IDLE_TTL_MS,
      TOUCH_INTERVAL_MS,
    );
    if (!live) throw new SessionError(SessionErrorCode.SESSION_NOT_FOUND, 'Session not found');
    if (live.touchDue) await this.touchIfPossible(id);
    if (epoch === this.invalidations && this.cacheUsable()) this.remember(live.session);
    return live.session;
  }

  /**
   * Slides the session's idle timer. Best effort when the database can be read but not written (a read-only
   * standby after a failover) or is briefly out of reach: a request that only reads must still be served, and
   * a missed touch only means the session looks idle since its last one (the next request touches it again;
   * SESSION_IDLE_TTL_MS is far longer than an outage a client retries through).
   */
  private async touchIfPossible(id: string): Promise<void> {
    try {
      await this.sessions.touch(id, TOUCH_INTERVAL_MS);
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      this.instances.noteDbError();
      this.logger.warn(`session touch skipped, database cannot write now: ${errorMessage(err)}`);
    }
  }

  /** A session by id, whoever owns it: for server-side work (a task's worker), never for a request. */
  async find(id: string): Promise<McpSession | null> {
    return this.sessions.findById(id);
  }

  /**
   * Ends the session, recording who and why (`reason`, and the actor of the audit context); resolves once
   * every live instance has dropped it (or BUS_HEARTBEAT_TIMEOUT_MS passed).
   */
  async end(session: McpSession, reason: SessionEndReason): Promise<void> {
    await this.sessions.end(session.id, reason);
    this.drop(session.id);
    await this.invalidateEverywhere(session.id);
  }

  /**
   * Every change of a session is one statement on its row, never a write-back of the copy this request
   * resolved (another instance may be changing the same session): the cached copies are dropped everywhere
   * after the write and read again.
   */
  async setLogLevel(session: McpSession, level: string): Promise<void> {
    await this.sessions.setLogLevel(session.id, level);
    await this.changed(session.id);
  }

  /** Refused with the subscriptions quota when the session already holds that many other URIs. */
  async subscribe(session: McpSession, uri: string): Promise<void> {
    const change = await this.sessions.addSubscription(
      session.id,
      uri,
      this.quotasConfig.QUOTA_SUBSCRIPTIONS_PER_SESSION,
    );
    if (change.outcome === 'gone')
      throw new SessionError(SessionErrorCode.SESSION_NOT_FOUND, 'Session not found');
    if (change.outcome === 'full') this.quotas.checkSubscriptions(change.held);
    if (change.outcome === 'added') await this.changed(session.id);
  }

  async unsubscribe(session: McpSession, uri: string): Promise<void> {
    await this.sessions.removeSubscription(session.id, uri);
    await this.changed(session.id);
  }

  async subscribedTo(uri: string): Promise<string[]> {
    return this.sessions.findSubscribed(uri);
  }

  /** Ends idle sessions, deletes long-ended ones with their events, and trims old events. Idempotent. */
  async sweep(): Promise<void> {
    const now = Date.now();
    await this.sessions.endIdle(new Date(now - this.config.SESSION_IDLE_TTL_MS));
    const gone = await this.sessions.deleteEndedBefore(new Date(now - this.config.SSE_EVENT_TTL_MS));
    await this.events.deleteForSessions(gone);
    await this.events.deleteOrphanCounters();
    await this.events.deleteOlderThan(new Date(now - this.config.SSE_EVENT_TTL_MS));
    await this.responses.deleteOlderThan(new Date(now - this.config.CLIENT_REQUEST_TIMEOUT_MS));
  }

  /** Sessions held in memory now (for metrics and tests). */
  get cachedSessions(): number {
    return this.cache.size;
  }

  private cacheUsable(): boolean {
    return this.config.SESSION_CACHE_MAX > 0 && this.bus.isHealthy;
  }

  private remember(session: McpSession): void {
    this.cache.delete(session.id);
    this.cache.set(session.id, { session, verifiedAt: performance.now() });
    while (this.cache.size > this.config.SESSION_CACHE_MAX) {
      const oldest = this.cache.keys().next().value as string;
      this.cache.delete(oldest);
    }
  }

  private drop(id: string): void {
    this.invalidations++;
    this.cache.delete(id);
  }

  private dropAll(): void {
    this.invalidations++;
    this.cache.clear();
  }

  /**
   * A change other instances must re-read (log level, subscriptions). It waits for their acknowledgements as
   * an end does, so a client that changed its session through one instance is served the change by every
   * instance next (a log level set on B, then a call on A). These are rare control calls; the wait is one
   * bus round trip, bounded by BUS_HEARTBEAT_TIMEOUT_MS.
   */
  private async changed(id: string): Promise<void> {
    this.drop(id);
    await this.invalidateEverywhere(id);
  }

  /**
   * Publishes the session's change or end and waits until every other live instance acknowledged dropping it, for at
   * most BUS_HEARTBEAT_TIMEOUT_MS. An instance that cannot hear it in time has an unhealthy LISTEN
   * connection: its cache is then bypassed, and cleared when the connection is replaced.
   */
  private async invalidateEverywhere(id: string): Promise<void> {
    const others = new Set(await this.instances.otherLiveInstanceIds());
    if (others.size === 0) {
      await this.bus.publish(SESSION_CHANNEL, { s: id });
      return;
    }
    const nonce = randomUUID();
    let timer: NodeJS.Timeout | undefined;
    const acked = new Promise<void>((resolve) => {
      this.ackWaiters.set(nonce, (from) => {
        others.delete(from);
        if (others.size === 0) resolve();
      });
      timer = setTimeout(() => {
        this.logger.warn(`session ${id} ended; ${others.size} instance(s) did not acknowledge in time`);
        resolve();
      }, this.busConfig.BUS_HEARTBEAT_TIMEOUT_MS);
    });
    try {
      await this.bus.publish(SESSION_CHANNEL, { s: id, a: nonce });
      await acked;
    } finally {
      clearTimeout(timer);
      this.ackWaiters.delete(nonce);
    }
  }
}
