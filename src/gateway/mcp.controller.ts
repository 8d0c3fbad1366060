import { All, Controller, Delete, Get, Logger, Post, Req, Res, UseGuards } from '@nestjs/common';
import type { Request, Response } from 'express';
import { unstorableText } from '../common/storable-text.js';
import { mapError } from '../protocol/error-mapping.js';
import {
  classifyMessage,
  errorResponse,
  InvalidMessageError,
  JSONRPC,
  type JsonRpcId,
} from '../protocol/json-rpc.js';
import type { JsonShapeError } from '../protocol/json-shape.js';
import { ProtocolError } from '../protocol/protocol.errors.js';
import { currentOperation } from '../telemetry/mcp-operation.js';
import { McpTelemetry } from '../telemetry/mcp-telemetry.service.js';
import type { Era } from '../protocol/request-context.js';
import { isModernVersion, META } from '../protocol/versions.js';
import { AuditTrail } from '../audit/audit-trail.service.js';
import { AuthChallenges, requiredScopesMissing } from '../principals/auth-challenges.js';
import { McpAuthGuard } from '../principals/mcp-auth.guard.js';
import { ANONYMOUS_PRINCIPAL, type Principal, type RequestWithPrincipal } from '../principals/principal.js';
import { QuotaExceededError } from '../quotas/quota.errors.js';
import { QuotaService } from '../quotas/quota.service.js';
import { ToolDispatchError, ToolDispatchErrorCode } from '../tool-dispatch/tool-dispatch.errors.js';
import { LegacyMcpHandler } from './legacy-mcp.handler.js';
import { ModernMcpHandler } from './modern-mcp.handler.js';
import { OriginGuard } from './origin.guard.js';
import { RETRY_AFTER_S } from './response-channel.js';

function accepts(req: Request, type: string): boolean {
  const accept = req.header('accept') ?? '';
  return accept.split(',').some((part) => {
    const t = part.split(';')[0].trim().toLowerCase();
    return t === type || t === '*/*' || t === `${type.split('/')[0]}/*`;
  });
}

/**
 * The modern era is claimed by `params._meta` naming a protocol version, or by an MCP-Protocol-Version
 * header naming a modern one (then a missing envelope is a -32602, never a silent fall back to sessions).
 */
function hasModernClaim(req: Request, body: unknown): boolean {
  const header = req.header('mcp-protocol-version');
  if (header !== undefined && isModernVersion(header.trim())) return true;
  if (typeof body !== 'object' || body === null) return false;
  const params = (body as { params?: unknown }).params;
  if (typeof params !== 'object' || params === null) return false;
  const meta = (params as { _meta?: unknown })._meta;
  return typeof meta === 'object' && meta !== null && META.PROTOCOL_VERSION in meta;
}

/**
 * The single MCP endpoint. It classifies each request into an era
 * (https://modelcontextprotocol.io/specification/2026-07-28/basic/versioning, compatibility matrix): a body whose
 * `params._meta` claims a protocol version is served statelessly (2026-07-28); initialize, any other POST,
 * GET and DELETE belong to the legacy era. Everything below this edge throws; errors are mapped here.
 */
@Controller('mcp')
// Guards run in order: the origin policy before authentication (README, The MCP endpoint).
@UseGuards(OriginGuard, McpAuthGuard)
export class McpController {
  private readonly logger = new Logger(McpController.name);

  constructor(
    private readonly legacy: LegacyMcpHandler,
    private readonly modern: ModernMcpHandler,
    private readonly challenges: AuthChallenges,
    private readonly telemetry: McpTelemetry,
    private readonly quotas: QuotaService,
    private readonly audit: AuditTrail,
  ) {}

  @Post()
  async post(@Req() req: Request, @Res() res: Response): Promise<void> {
    const op = this.telemetry.begin(req);
    if (!op) return this.handlePost(req, res);
    try {
      await this.telemetry.run(op, () => this.handlePost(req, res));
    } finally {
      // initialize answers with the new session's id; later requests named it in their header.
      const created = res.getHeader('mcp-session-id');
      if (typeof created === 'string' && !req.header('mcp-session-id')) op.setSessionId(created);
      op.end();
    }
  }

  private async handlePost(req: Request, res: Response): Promise<void> {
    let era: Era = 'legacy';
    let id: JsonRpcId | null = null;
    // The client may have left while authentication ran: then no database work is spent on it.
    if (res.destroyed) return;
    try {
      if (!accepts(req, 'application/json') || !accepts(req, 'text/event-stream')) {
        throw new ProtocolError(
          JSONRPC.SERVER_ERROR,
          'Not Acceptable: the client must accept both application/json and text/event-stream',
          406,
        );
      }
      if (!req.is('application/json')) {
        throw new ProtocolError(
          JSONRPC.SERVER_ERROR,
          'Unsupported Media Type: Content-Type must be application/json',
          415,
        );
      }
      const refusal = res.locals.jsonShapeRefusal as JsonShapeError | undefined;
      if (refusal) {
        id = refusal.id;
        const principal = this.principal(req);
        this.quotas.checkPrincipalRate(principal.id);
        await this.refuseShape(req, refusal, principal);
      }
      const body: unknown = req.body;
      if (Array.isArray(body)) {
        throw new ProtocolError(JSONRPC.INVALID_REQUEST, 'Invalid Request: batches are not supported', 400);
      }
      let classified;
      try {
        classified = classifyMessage(body);
      } catch (err) {
        if (err instanceof InvalidMessageError) {
          id = err.id;
          throw new ProtocolError(JSONRPC.INVALID_REQUEST, err.message, 400);
        }
        throw err;
      }
      if (classified.kind === 'request') id = classified.message.id;
      // Arguments, answers and results are stored as jsonb or text, which refuse such text on every try.
      // The body parser noted whether the raw text has any \u escape, the only way such text gets in.
      const unstorable = res.locals.jsonUnicodeEscapes === false ? null : unstorableText(body, '');
      if (unstorable) throw ProtocolError.invalidParams(`${unstorable}, which cannot be stored`);
      const principal = this.principal(req);
      this.quotas.checkPrincipalRate(principal.id);
      const listen = classified.kind === 'request' && classified.message.method === 'subscriptions/listen';
      // A listen is a stream (refused at the quota); any other request is in flight and its answer may
      // become a stream, counted but never cut off once accepted. Responses and notifications are not
      // limited: they are short, and refusing a client's answer would stall work already accepted.
      if (listen) this.holdStream(res, principal);
      else if (classified.kind === 'request') {
        this.hold(res, this.quotas.acquire('in_flight', principal.id));
        res.locals.onSseOpen = () => this.hold(res, this.quotas.acquire('streams', principal.id, true));
      }
      // A tools/call's tool and the caller's scopes are resolved once, first thing in the era handler.
      if (hasModernClaim(req, body)) {
        era = 'modern';
        if (classified.kind === 'response') {
          throw new ProtocolError(
            JSONRPC.INVALID_REQUEST,
            'Invalid Request: clients do not send responses in 2026-07-28',
            400,
          );
        }
        if (classified.kind === 'notification') {
          this.modern.validate(req, classified.message);
          res.status(202).end();
          return;
        }
        if (classified.message.method === 'subscriptions/listen') {
          await this.modern.listen(req, res, classified.message, principal);
          return;
        }
        await this.modern.request(req, res, classified.message, principal);
        return;
      }
      if (classified.kind === 'request' && classified.message.method === 'initialize') {
        await this.legacy.initialize(req, res, classified.message, principal);
        return;
      }
      await this.legacy.post(req, res, classified, principal);
    } catch (err) {
      this.fail(req, res, err, era, id);
    }
  }

  @Get()
  async get(@Req() req: Request, @Res() res: Response): Promise<void> {
    if (res.destroyed) return;
    try {
      if (!accepts(req, 'text/event-stream')) {
        throw new ProtocolError(
          JSONRPC.SERVER_ERROR,
          'Not Acceptable: the client must accept text/event-stream',
          406,
        );
      }
      const principal = this.principal(req);
      this.quotas.checkPrincipalRate(principal.id);
      this.holdStream(res, principal);
      await this.legacy.get(req, res, principal);
    } catch (err) {
      this.fail(req, res, err, 'legacy', null);
    }
  }

  @Delete()
  async delete(@Req() req: Request, @Res() res: Response): Promise<void> {
    try {
      const principal = this.principal(req);
      this.quotas.checkPrincipalRate(principal.id);
      await this.legacy.delete(req, res, principal);
    } catch (err) {
      this.fail(req, res, err, 'legacy', null);
    }
  }

  @All()
  other(@Res() res: Response): void {
    res.setHeader('Allow', 'GET, POST, DELETE');
    res.status(405).json(errorResponse(null, { code: JSONRPC.SERVER_ERROR, message: 'Method Not Allowed' }));
  }

  /**
   * A body past a JSON shape limit (checked before parsing, app.setup.ts) is the client's error. When it was
   * a client's answer to a server request of a session, the call waiting for that answer fails now with
   * the same reason instead of waiting for CLIENT_REQUEST_TIMEOUT_MS.
   */
  private async refuseShape(req: Request, refusal: JsonShapeError, principal: Principal): Promise<never> {
    if (refusal.isResponse && refusal.id !== null && req.header('mcp-session-id') !== undefined) {
      await this.legacy.refuseClientResponse(req, principal, refusal.id, refusal.message);
    }
    throw new ProtocolError(refusal.code, refusal.message, 400, {
      limit: refusal.setting,
      max: refusal.max,
    });
  }

  /** Keeps a quota lease for as long as the response lives (released when it closes, however it ends). */
  private hold(res: Response, release: () => void): void {
    if (res.destroyed || res.writableFinished) release();
    else res.once('close', release);
  }

  /** A GET or listen stream: refused at the principal's stream quota, held until the stream closes. */
  private holdStream(res: Response, principal: Principal): void {
    this.hold(res, this.quotas.acquire('streams', principal.id));
    res.locals.onSseOpen = undefined;
  }

  private principal(req: Request): Principal {
    return (req as Request & RequestWithPrincipal).principal ?? ANONYMOUS_PRINCIPAL;
  }

  private fail(req: Request, res: Response, err: unknown, era: Era, id: JsonRpcId | null): void {
    const mapped = mapError(err, era);
    currentOperation()?.failed(mapped.error.code, mapped.error.message);
    if (
      err instanceof ToolDispatchError &&
      err.code === ToolDispatchErrorCode.INSUFFICIENT_SCOPE &&
      !res.headersSent
    ) {
      const scopes = (err.data?.requiredScopes as string[] | undefined) ?? [];
      const principal = this.principal(req);
      // Not awaited and coalesced (AuditTrail.recordSoon): a client looping on a refused tool costs no
      // more than one INSERT in flight.
      this.audit.recordSoon({
        kind: 'auth.scope_refused',
        principal: principal.id,
        tool: typeof err.data?.name === 'string' ? err.data.name : null,
        era,
        detail: { missing: requiredScopesMissing(principal, scopes), route: 'tools/call' },
      });
      res.setHeader('WWW-Authenticate', this.challenges.insufficientScope(req, scopes).wwwAuthenticate);
    }
    if (err instanceof QuotaExceededError && err.retryAfterSeconds !== undefined && !res.headersSent) {
      res.setHeader('Retry-After', String(err.retryAfterSeconds));
    }
    if (res.headersSent) {
      this.logger.warn(`error after the response started: ${mapped.error.message}`);
      if (!res.writableEnded) res.end();
      return;
    }
    const status = mapped.httpStatus === 200 && id === null ? 400 : mapped.httpStatus;
    if (status === 503) res.setHeader('Retry-After', String(RETRY_AFTER_S));
    res.status(status).json(errorResponse(id, mapped.error));
  }
}
