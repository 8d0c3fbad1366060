import { Injectable } from '@nestjs/common';
import type { Request, Response } from 'express';
import { mapError } from '../protocol/error-mapping.js';
import {
  errorResponse,
  JSONRPC,
  type JsonRpcId,
  type JsonRpcNotification,
  type JsonRpcRequest,
  type JsonRpcResponse,
} from '../protocol/json-rpc.js';
import { McpMethodsService, SERVER_INFO } from '../protocol/mcp-methods.service.js';
import { resolveToolCall } from '../protocol/tool-call-access.js';
import type { ResolvedTool } from '../tool-dispatch/tool-registry.service.js';
import { ToolRegistry } from '../tool-dispatch/tool-registry.service.js';
import { MethodRegistry } from '../protocol/method-registry.js';
import { ProtocolError } from '../protocol/protocol.errors.js';
import { IDEMPOTENCY_KEY_HEADER, idempotencyKeyOf } from '../protocol/idempotency-key.js';
import { isLoggingLevel, type McpRequestContext } from '../protocol/request-context.js';
import { isLegacyVersion, negotiateLegacyVersion } from '../protocol/versions.js';
import { currentOperation } from '../telemetry/mcp-operation.js';
import type { Principal } from '../principals/principal.js';
import { QuotaService } from '../quotas/quota.service.js';
import type { McpSession } from '../sessions/session.entity.js';
import { SessionError } from '../sessions/sessions.errors.js';
import { SessionsService } from '../sessions/sessions.service.js';
import { SseEventsRepository } from '../sessions/sse-events.repository.js';
import { ClientRequestsService } from './client-requests.service.js';
import { InFlightService } from './in-flight.service.js';
import { LegacyInput } from './legacy-input.js';
import { McpResponder } from './mcp-responder.js';
import { LegacyChannel } from './response-channel.js';
import { SseWriter } from './sse-writer.js';
import { formatEventId, parseEventId, STANDALONE_STREAM, StreamHub } from './stream-hub.service.js';
import { progressTokenOf } from '../common/progress-token.js';
import { GatewayConfig } from './gateway.config.js';

type Params = Record<string, unknown>;

/** HTTP 410 for a Last-Event-ID whose following events are no longer logged (see README, SSE event order). */
function resumeGone(lastEventId: string, missed: number): ProtocolError {
  return new ProtocolError(
    JSONRPC.SERVER_ERROR,
    `Gone: ${missed} event(s) after Last-Event-ID ${lastEventId} are no longer logged; open a new stream ` +
      'without Last-Event-ID and re-read what you track (tasks/get, tasks/list)',
    410,
    { lastEventId, missedEvents: missed },
  );
}
/**
 * The legacy era (2024-11-05 … 2025-11-25) on Streamable HTTP: initialize opens a persisted session;
 * every later message names it in Mcp-Session-Id; GET opens the session's own stream or resumes a dropped
 * one; DELETE ends the session.
 */
@Injectable()
export class LegacyMcpHandler {
  constructor(
    private readonly sessions: SessionsService,
    private readonly mcp: McpMethodsService,
    private readonly methods: MethodRegistry,
    private readonly registry: ToolRegistry,
    private readonly hub: StreamHub,
    private readonly events: SseEventsRepository,
    private readonly clientRequests: ClientRequestsService,
    private readonly inFlight: InFlightService,
    private readonly responder: McpResponder,
    private readonly config: GatewayConfig,
    private readonly quotas: QuotaService,
  ) {}

  async initialize(
    req: Request,
    res: Response,
    message: JsonRpcRequest,
    principal: Principal,
  ): Promise<void> {
    if (req.header('mcp-session-id')) {
      throw new ProtocolError(
        JSONRPC.INVALID_REQUEST,
        'Invalid Request: this session is already initialized',
        400,
      );
    }
    const p = message.params ?? {};
    if (typeof p.protocolVersion !== 'string')
      throw ProtocolError.invalidParams('params.protocolVersion must be a string', undefined, 400);
    const caps = p.capabilities;
    if (typeof caps !== 'object' || caps === null || Array.isArray(caps)) {
      throw ProtocolError.invalidParams('params.capabilities must be an object', undefined, 400);
    }
    const info = p.clientInfo;
    if (typeof info !== 'object' || info === null || Array.isArray(info)) {
      throw ProtocolError.invalidParams('params.clientInfo must be an object', undefined, 400);
    }
    this.quotas.checkBytes('session_client_bytes', { capabilities: caps, clientInfo: info }, 413);
    const version = negotiateLegacyVersion(p.protocolVersion);
    currentOperation()?.setProtocolVersion(version);
    const session = await this.sessions.open(principal, version, caps as Params, info as Params);
    res.setHeader('Mcp-Session-Id', session.id);
    res.status(200).json({
      jsonrpc: '2.0',
      id: message.id,
      result: {
        protocolVersion: version,
        capabilities: this.mcp.capabilities('legacy'),
        serverInfo: SERVER_INFO,
        instructions:
          'Long-running tools run as tasks: poll them with tasks/get and collect results with tasks/result.',
      },
    });
  }

  /** Every POST after initialize: resolves the session, then routes requests, notifications and responses. */
  async post(
    req: Request,
    res: Response,
    message:
      | { kind: 'request'; message: JsonRpcRequest }
      | { kind: 'notification'; message: JsonRpcNotification }
      | { kind: 'response'; message: JsonRpcResponse },
    principal: Principal,
  ): Promise<void> {
    // The call's one tool lookup, before the session is resolved (a scope refusal answers 403 first).
    const toolsCall = message.kind === 'request' && message.message.method === 'tools/call';
    const tool = toolsCall ? resolveToolCall(this.registry, message.message.params, principal) : undefined;
    // Only a tools/call can create a task, the one thing the key names; every other request ignores it.
    const idempotencyKey = toolsCall ? idempotencyKeyOf(req.header(IDEMPOTENCY_KEY_HEADER)) : undefined;
    const session = await this.session(req, principal);
    this.checkVersionHeader(req);
    switch (message.kind) {
      case 'notification':
        await this.onNotification(session, message.message);
        res.status(202).end();
        return;
      case 'response':
        await this.clientRequests.deliver(session.id, message.message);
        res.status(202).end();
        return;
      case 'request':
        await this.onRequest(res, session, message.message, principal, tool, idempotencyKey);
        return;
    }
  }

  async get(req: Request, res: Response, principal: Principal): Promise<void> {
    const session = await this.session(req, principal);
    this.checkVersionHeader(req);
    const lastEventId = req.header('last-event-id');
    const resume = lastEventId ? parseEventId(lastEventId) : undefined;
    const point = resume && (await this.events.resumePoint(session.id, resume.streamId, resume.seq));
    if (resume && point?.issued) {
      // Events the client never saw have aged out (SSE_EVENT_TTL_MS, SSE_STREAM_RETENTION): replaying the
      // rest would skip them silently, so the resume is refused and the client starts afresh.
      if (point.missed > 0) throw resumeGone(formatEventId(resume.streamId, resume.seq), point.missed);
      const requestStream = resume.streamId !== STANDALONE_STREAM;
      const writer = new SseWriter(res, this.config.SSE_KEEPALIVE_MS);
      // Resuming a request stream after its response: nothing will ever follow, so do not hold it open.
      if (requestStream && point.ended) {
        writer.end();
        return;
      }
      this.hub.attach(session.id, resume.streamId, writer, resume.seq, requestStream);
      return;
    }
    if (this.hub.hasLocalHolder(session.id, STANDALONE_STREAM)) {
      throw new ProtocolError(
        JSONRPC.SERVER_ERROR,
        'Conflict: this session already has an open GET stream',
        409,
      );
    }
    const writer = new SseWriter(res, this.config.SSE_KEEPALIVE_MS);
    const primingSeq = await this.events.append(session.id, STANDALONE_STREAM, null);
    writer.prime(`${STANDALONE_STREAM}_${primingSeq}`, this.config.SSE_RETRY_MS);
    this.hub.attach(session.id, STANDALONE_STREAM, writer, primingSeq, false);
  }

  async delete(req: Request, res: Response, principal: Principal): Promise<void> {
    const session = await this.session(req, principal);
    await this.sessions.end(session, 'client');
    res.status(200).json({});
  }

  /**
   * A client's response whose body was refused unparsed (a JSON shape limit): the server request it answers
   * fails with that reason, so the call waiting on it ends now. An unknown session has nothing waiting.
   */
  async refuseClientResponse(
    req: Request,
    principal: Principal,
    id: JsonRpcId,
    reason: string,
  ): Promise<void> {
    let session: McpSession;
    try {
      session = await this.session(req, principal);
    } catch (err) {
      if (err instanceof SessionError || err instanceof ProtocolError) return;
      throw err;
    }
    await this.clientRequests.deliver(session.id, {
      jsonrpc: '2.0',
      id,
      error: { code: JSONRPC.INVALID_PARAMS, message: `The client's response was refused: ${reason}` },
    });
  }

  private async session(req: Request, principal: Principal): Promise<McpSession> {
    const id = req.header('mcp-session-id');
    if (!id)
      throw new ProtocolError(JSONRPC.SERVER_ERROR, 'Bad Request: Mcp-Session-Id header is required', 400);
    const session = await this.sessions.resolve(id.trim(), principal);
    currentOperation()?.setProtocolVersion(session.protocolVersion);
    return session;
  }

  private checkVersionHeader(req: Request): void {
    const v = req.header('mcp-protocol-version');
    if (v !== undefined && !isLegacyVersion(v.trim())) {
      throw new ProtocolError(JSONRPC.SERVER_ERROR, `Bad Request: Unsupported protocol version: ${v}`, 400);
    }
  }

  private async onNotification(session: McpSession, n: JsonRpcNotification): Promise<void> {
    if (n.method === 'notifications/cancelled') {
      const id = n.params?.requestId;
      if (typeof id === 'string' || typeof id === 'number') {
        await this.inFlight.cancel(
          session.id,
          id,
          typeof n.params?.reason === 'string' ? n.params.reason : 'cancelled',
        );
      }
    }
    // notifications/initialized, roots/list_changed and others need no action.
  }

  private async onRequest(
    res: Response,
    session: McpSession,
    m: JsonRpcRequest,
    principal: Principal,
    tool: ResolvedTool | undefined,
    idempotencyKey: string | undefined,
  ): Promise<void> {
    const channel = new LegacyChannel(res, session.id, this.hub, this.events, {
      keepAliveMs: this.config.SSE_KEEPALIVE_MS,
      retryMs: this.config.SSE_RETRY_MS,
    });
    const { controller, done } = this.inFlight.start(session.id, m.id);
    // A disconnect is not a cancellation in this era: the work goes on and a stream can be resumed. A
    // tasks/result that has not opened a stream, though, only waits; with its client gone nobody can ever
    // receive its answer, so the wait (and its quota lease, its timers and database polls) ends there.
    const onGone = (): void => {
      if (!res.headersSent) controller.abort(new Error('the client left before the result'));
    };
    if (m.method === 'tasks/result') {
      // The client may have left while the request queued (then 'close' has fired already).
      if (res.destroyed) onGone();
      else res.once('close', onGone);
    }
    const params = m.params ?? {};
    const meta = (params._meta ?? {}) as Params;
    const progressToken = progressTokenOf(meta);
    const ctx: McpRequestContext & { session: McpSession } = {
      era: 'legacy',
      protocolVersion: session.protocolVersion,
      principal,
      session,
      clientCapabilities: session.clientCapabilities,
      requestId: m.id,
      method: m.method,
      signal: controller.signal,
      progressToken,
      logLevel: isLoggingLevel(session.logLevel) ? session.logLevel : 'debug',
      notify: (method, p) => channel.emit({ jsonrpc: '2.0', method, params: p }),
      input: new LegacyInput(session, channel, this.clientRequests, controller.signal),
      closeSseStream: () => channel.closeConnection(),
      tool,
      idempotencyKey,
    };
    try {
      if (m.method === 'initialize') {
        throw new ProtocolError(
          JSONRPC.INVALID_REQUEST,
          'Invalid Request: this session is already initialized',
          400,
        );
      }
      const handler = this.methods.handler(m.method, 'legacy');
      await this.responder.run(
        'legacy',
        m.id,
        channel,
        async () => {
          if (!handler) throw ProtocolError.methodNotFound(m.method);
          return handler(params, ctx);
        },
        undefined,
        controller.signal,
      );
    } catch (err) {
      const mapped = mapError(err, 'legacy');
      currentOperation()?.failed(mapped.error.code, mapped.error.message);
      await channel.respond(errorResponse(m.id, mapped.error), mapped.httpStatus);
    } finally {
      res.off('close', onGone);
      done();
    }
  }
}
