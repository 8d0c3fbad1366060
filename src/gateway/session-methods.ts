import { Injectable, type OnModuleInit } from '@nestjs/common';
import { MethodRegistry } from '../protocol/method-registry.js';
import { ProtocolError } from '../protocol/protocol.errors.js';
import { isLoggingLevel, type McpRequestContext } from '../protocol/request-context.js';
import type { McpSession } from '../sessions/session.entity.js';
import { SessionsService } from '../sessions/sessions.service.js';

/** Longest resource URI a session may subscribe to (a URI, not a place to store data). */
export const MAX_SUBSCRIBED_URI_LENGTH = 2048;

function sessionOf(ctx: McpRequestContext): McpSession {
  if (!ctx.session) throw new Error(`${ctx.method} needs the request's session`);
  return ctx.session;
}

/** The legacy-era (2025-11-25) methods that act on the session itself: ping, log level, subscriptions. */
@Injectable()
export class SessionMethods implements OnModuleInit {
  constructor(
    private readonly methods: MethodRegistry,
    private readonly sessions: SessionsService,
  ) {}

  onModuleInit(): void {
    const legacy = { eras: ['legacy'] } as const;
    this.methods.register('ping', async () => ({}), legacy);
    this.methods.register(
      'logging/setLevel',
      async (p, ctx) => {
        if (!isLoggingLevel(p.level))
          throw ProtocolError.invalidParams('params.level must be a valid logging level');
        await this.sessions.setLogLevel(sessionOf(ctx), p.level);
        return {};
      },
      legacy,
    );
    this.methods.register(
      'resources/subscribe',
      async (p, ctx) => {
        // Stored in the session row: QUOTA_SUBSCRIPTIONS_PER_SESSION entries of at most this length each; the
        // quota is checked in the same statement that adds the URI (SessionsService.subscribe).
        if (typeof p.uri !== 'string' || !p.uri || p.uri.length > MAX_SUBSCRIBED_URI_LENGTH) {
          throw ProtocolError.invalidParams(
            `params.uri must be a string of 1 to ${MAX_SUBSCRIBED_URI_LENGTH} characters`,
          );
        }
        await this.sessions.subscribe(sessionOf(ctx), p.uri);
        return {};
      },
      legacy,
    );
    this.methods.register(
      'resources/unsubscribe',
      async (p, ctx) => {
        if (typeof p.uri !== 'string' || !p.uri)
          throw ProtocolError.invalidParams('params.uri must be a string');
        await this.sessions.unsubscribe(sessionOf(ctx), p.uri);
        return {};
      },
      legacy,
    );
  }
}
