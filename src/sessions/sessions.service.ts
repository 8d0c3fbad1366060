import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { AppConfig } from '../config/app-config.js';
import type { Principal } from '../principals/principal.js';
import { QuotaService } from '../quotas/quota.service.js';
import { ClientResponsesRepository } from './client-responses.repository.js';
import type { McpSession } from './session.entity.js';
import { SessionError, SessionErrorCode } from './sessions.errors.js';
import { SessionsRepository } from './sessions.repository.js';
import { SseEventsRepository } from './sse-events.repository.js';

const TOUCH_INTERVAL_MS = 5000;
const SWEEP_INTERVAL_MS = 60000;

@Injectable()
export class SessionsService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(SessionsService.name);
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly sessions: SessionsRepository,
    private readonly events: SseEventsRepository,
    private readonly responses: ClientResponsesRepository,
    private readonly config: AppConfig,
    private readonly quotas: QuotaService,
  ) {}

  onApplicationBootstrap(): void {
    this.sweeper = setInterval(() => {
      this.sweep().catch((err: unknown) =>
        this.logger.warn(`session sweep failed: ${err instanceof Error ? err.message : String(err)}`),
      );
    }, SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  onApplicationShutdown(): void {
    clearInterval(this.sweeper);
  }

  /** 192 random bits, base64url: visible ASCII, unguessable. */
  static newId(): string {
    return randomBytes(24).toString('base64url');
  }

  async open(
    principal: Principal,
    protocolVersion: string,
    clientCapabilities: Record<string, unknown>,
    clientInfo: Record<string, unknown> | null,
  ): Promise<McpSession> {
    const max = this.config.QUOTA_SESSIONS_PER_PRINCIPAL;
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

  /** The live session for this principal, or SESSION_NOT_FOUND. Refreshes its idle timer. */
  async resolve(id: string, principal: Principal): Promise<McpSession> {
    const live = await this.sessions.findLive(
      id,
      principal.id,
      this.config.SESSION_IDLE_TTL_MS,
      TOUCH_INTERVAL_MS,
    );
    if (!live) throw new SessionError(SessionErrorCode.SESSION_NOT_FOUND, 'Session not found');
    if (live.touchDue) await this.sessions.touch(id, TOUCH_INTERVAL_MS);
    return live.session;
  }

  /** A session by id, whoever owns it: for server-side work (a task's worker), never for a request. */
  async find(id: string): Promise<McpSession | null> {
    return this.sessions.findById(id);
  }

  async end(session: McpSession): Promise<void> {
    await this.sessions.end(session.id);
  }

  async setLogLevel(session: McpSession, level: string): Promise<void> {
    await this.sessions.setLogLevel(session.id, level);
    session.logLevel = level;
  }

  async subscribe(session: McpSession, uri: string): Promise<void> {
    const set = new Set(session.resourceSubscriptions);
    set.add(uri);
    session.resourceSubscriptions = [...set];
    await this.sessions.setSubscriptions(session.id, session.resourceSubscriptions);
  }

  async unsubscribe(session: McpSession, uri: string): Promise<void> {
    session.resourceSubscriptions = session.resourceSubscriptions.filter((u) => u !== uri);
    await this.sessions.setSubscriptions(session.id, session.resourceSubscriptions);
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
    await this.events.deleteOlderThan(new Date(now - this.config.SSE_EVENT_TTL_MS));
    await this.responses.deleteOlderThan(new Date(now - this.config.CLIENT_REQUEST_TIMEOUT_MS));
  }
}
