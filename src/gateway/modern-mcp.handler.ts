import { Injectable } from '@nestjs/common';
import type { Request, Response } from 'express';
import { JSONRPC, type JsonRpcRequest } from '../protocol/json-rpc.js';
import { decodeHeaderValue, nameFieldFor } from '../protocol/mcp-headers.js';
import { CACHEABLE_METHODS } from '../protocol/mcp-methods.service.js';
import { modernCompleteResult } from '../protocol/modern-result.js';
import { MethodRegistry } from '../protocol/method-registry.js';
import { InputRequiredSignal, MrtrInput } from '../protocol/mrtr-input.js';
import { ProtocolError } from '../protocol/protocol.errors.js';
import { IDEMPOTENCY_KEY_HEADER, idempotencyKeyOf } from '../protocol/idempotency-key.js';
import { isLoggingLevel, type McpRequestContext } from '../protocol/request-context.js';
import { paramsDigest, RequestStateCodec } from '../protocol/request-state.js';
import { isModernVersion, META, MODERN_VERSIONS } from '../protocol/versions.js';
import type { Principal } from '../principals/principal.js';
import { resolveToolCall } from '../protocol/tool-call-access.js';
import type { ResolvedTool } from '../tool-dispatch/tool-registry.service.js';
import { ToolRegistry } from '../tool-dispatch/tool-registry.service.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import { McpResponder } from './mcp-responder.js';
import { ModernChannel } from './response-channel.js';
import { SseStreams } from './sse-streams.service.js';
import { SseWriter } from './sse-writer.js';
import { isJsonObject } from '../common/json.js';
import { progressTokenOf } from '../common/progress-token.js';
import { ProtocolConfig } from '../protocol/protocol.config.js';
import { GatewayConfig } from './gateway.config.js';

type Params = Record<string, unknown>;

/** Methods whose input is gathered in MRTR rounds. */
const MRTR_METHODS = new Set(['tools/call', 'prompts/get', 'resources/read']);

/**
 * The 2026-07-28 era: no session; every request carries its version, capabilities and identity in
 * `params._meta`, mirrored in headers that must agree with the body. Input is gathered in MRTR rounds.
 */
@Injectable()
export class ModernMcpHandler {
  private readonly stateCodec: RequestStateCodec;

  constructor(
    private readonly methods: MethodRegistry,
    private readonly responder: McpResponder,
    private readonly registry: ToolRegistry,
    private readonly lifecycle: LifecycleService,
    private readonly streams: SseStreams,
    private readonly config: GatewayConfig,
    private readonly protocolConfig: ProtocolConfig,
  ) {
    this.stateCodec = new RequestStateCodec(protocolConfig.MRTR_STATE_SECRET);
  }

  /** The -32602 / -32022 / -32020 ladder, before anything runs. Returns the validated envelope. */
  validate(
    req: Request,
    m: { method: string; params?: Params; id?: unknown },
    tool?: ResolvedTool,
  ): { version: string; caps: Params; meta: Params } {
    const meta = m.params?._meta;
    if (!isJsonObject(meta)) throw ProtocolError.invalidParams('params._meta is required', undefined, 400);
    const version = meta[META.PROTOCOL_VERSION];
    if (typeof version !== 'string' || version.length === 0) {
      throw ProtocolError.invalidParams(
        `params._meta["${META.PROTOCOL_VERSION}"] must be a string`,
        undefined,
        400,
      );
    }
    const caps = meta[META.CLIENT_CAPABILITIES];
    if (!isJsonObject(caps)) {
      throw ProtocolError.invalidParams(
        `params._meta["${META.CLIENT_CAPABILITIES}"] must be an object`,
        undefined,
        400,
      );
    }
    if (meta[META.CLIENT_INFO] !== undefined && !isJsonObject(meta[META.CLIENT_INFO])) {
      throw ProtocolError.invalidParams(
        `params._meta["${META.CLIENT_INFO}"] must be an object`,
        undefined,
        400,
      );
    }
    // Header agreement first: a request whose header and body disagree is a mismatch, whatever the versions.
    const headerVersion = req.header('mcp-protocol-version');
    if (headerVersion === undefined)
      throw ProtocolError.headerMismatch('MCP-Protocol-Version header is required');
    if (headerVersion.trim() !== version) {
      throw ProtocolError.headerMismatch(
        `MCP-Protocol-Version header '${headerVersion.trim()}' does not match _meta protocolVersion '${version}'`,
      );
    }
    if (!isModernVersion(version)) {
      throw new ProtocolError(
        JSONRPC.UNSUPPORTED_PROTOCOL_VERSION,
        `Unsupported protocol version: ${version}`,
        400,
        {
          supported: [...MODERN_VERSIONS],
          requested: version,
        },
      );
    }
    const headerMethod = req.header('mcp-method');
    if (headerMethod === undefined) throw ProtocolError.headerMismatch('Mcp-Method header is required');
    const method = decodeHeaderValue(headerMethod, 'Mcp-Method');
    if (method !== m.method) {
      throw ProtocolError.headerMismatch(
        `Mcp-Method header value '${method}' does not match body method '${m.method}'`,
      );
    }
    const field = nameFieldFor(m.method);
    if (field) {
      const headerName = req.header('mcp-name');
      const bodyValue = m.params?.[field];
      if (headerName === undefined) throw ProtocolError.headerMismatch('Mcp-Name header is required');
      const name = decodeHeaderValue(headerName, 'Mcp-Name');
      if (name !== bodyValue) {
        throw ProtocolError.headerMismatch(
          `Mcp-Name header value '${name}' does not match body ${field} '${String(bodyValue)}'`,
        );
      }
    }
    if (m.method === 'tools/call') this.checkParamHeaders(req, m.params ?? {}, tool);
    return { version, caps, meta };
  }

  /**
   * SEP-2243: a tool argument whose schema property carries `x-mcp-header: Name` is mirrored by the client
   * in `Mcp-Param-Name`; the header and the body must agree (an omitted header for a present value too).
   */
  private checkParamHeaders(req: Request, params: Params, tool: ResolvedTool | undefined): void {
    const properties = tool?.descriptor?.inputSchema.properties;
    if (!isJsonObject(properties)) return;
    const args = isJsonObject(params.arguments) ? params.arguments : {};
    for (const [prop, schema] of Object.entries(properties)) {
      const headerName = isJsonObject(schema) ? schema['x-mcp-header'] : undefined;
      if (typeof headerName !== 'string') continue;
      const raw = req.header(`mcp-param-${headerName}`);
      const value = args[prop];
      if (value === undefined || value === null) {
        if (raw !== undefined)
          throw ProtocolError.headerMismatch(
            `Mcp-Param-${headerName} is set but arguments.${prop} is absent`,
          );
        continue;
      }
      if (raw === undefined)
        throw ProtocolError.headerMismatch(
          `Mcp-Param-${headerName} header is required for arguments.${prop}`,
        );
      const decoded = decodeHeaderValue(raw, `Mcp-Param-${headerName}`);
      const expected = typeof value === 'string' ? value : JSON.stringify(value);
      if (decoded !== expected) {
        throw ProtocolError.headerMismatch(
          `Mcp-Param-${headerName} header value '${decoded}' does not match arguments.${prop} '${expected}'`,
        );
      }
    }
  }

  async request(req: Request, res: Response, m: JsonRpcRequest, principal: Principal): Promise<void> {
    // The call's one tool lookup, before the envelope checks (a scope refusal answers 403 first).
    const tool = m.method === 'tools/call' ? resolveToolCall(this.registry, m.params, principal) : undefined;
    const { version, caps, meta } = this.validate(req, m, tool);
    // Only a tools/call can create a task, the one thing the key names; every other request ignores it.
    const idempotencyKey =
      m.method === 'tools/call' ? idempotencyKeyOf(req.header(IDEMPOTENCY_KEY_HEADER)) : undefined;
    const params = m.params ?? {};
    const handler = this.methods.handler(m.method, 'modern');
    if (!handler) throw ProtocolError.methodNotFound(m.method, 404);

    const channel = new ModernChannel(res, {
      keepAliveMs: this.config.SSE_KEEPALIVE_MS,
      retryMs: this.config.SSE_RETRY_MS,
      onStream: (writer) => this.streams.track('stateless', writer),
    });
    const controller = new AbortController();
    // Closing the response (or the request) before the answer is a cancellation in this era.
    const onClose = (): void => {
      if (!res.writableFinished) controller.abort(new Error('the client closed the request stream'));
    };
    // A client gone before we got here (its 'close' already fired) has cancelled too.
    if (res.destroyed) onClose();
    else res.once('close', onClose);

    const mrtr = MRTR_METHODS.has(m.method);
    const answers = mrtr ? this.answersFor(params, m.method, principal) : {};
    const input = new MrtrInput(answers, caps);
    const progressToken = progressTokenOf(meta);
    const logLevel = meta[META.LOG_LEVEL];
    const ctx: McpRequestContext = {
      era: 'modern',
      protocolVersion: version,
      principal,
      clientCapabilities: caps,
      requestId: m.id,
      method: m.method,
      signal: controller.signal,
      progressToken,
      logLevel: isLoggingLevel(logLevel) ? logLevel : null,
      notify: (method, p) => channel.emit({ jsonrpc: '2.0', method, params: p }),
      input,
      answers,
      tool,
      idempotencyKey,
    };
    await this.responder.run(
      'modern',
      m.id,
      channel,
      async () => {
        try {
          return await handler(params, ctx);
        } catch (err) {
          if (mrtr && err instanceof InputRequiredSignal)
            return this.inputRequired(err, params, m.method, principal, answers);
          throw err;
        }
      },
      (result) => this.decorate(m.method, result),
      controller.signal,
    );
  }

  /**
   * subscriptions/listen: acknowledges the filters it will honour, then holds the stream open, every message
   * tagged with the subscription id (the listen request's id). Ends when the client closes it or at drain.
   */
  async listen(req: Request, res: Response, m: JsonRpcRequest, principal: Principal): Promise<void> {
    const { caps } = this.validate(req, m);
    const filters = isJsonObject(m.params?.notifications) ? m.params.notifications : {};
    const agreed: Params = {};
    // List-changed filters are accepted; this server's lists are fixed at startup, so they never fire.
    for (const key of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged']) {
      if (filters[key] === true) agreed[key] = true;
    }
    const closed = new AbortController();
    // A client that leaves while the filters are still being set up must end them too (their bus handlers).
    const onGone = (): void => closed.abort();
    res.once('close', onGone);
    const tag = { [META.SUBSCRIPTION_ID]: m.id };
    // Filters are set up before the stream opens (their refusals are plain HTTP errors); anything they
    // deliver before the acknowledgement waits and follows it.
    const stream: { writer?: SseWriter; early: Record<string, unknown>[] } = { early: [] };
    const send = (method: string, params: Params): void => {
      const message = { jsonrpc: '2.0', method, params: { _meta: tag, ...params } };
      if (stream.writer) stream.writer.send(message);
      else stream.early.push(message);
    };
    try {
      for (const [key, handler] of this.methods.listenFilters()) {
        if (filters[key] !== undefined) {
          agreed[key] = await handler(
            filters[key],
            { principal, clientCapabilities: caps, signal: closed.signal },
            send,
          );
        }
      }
    } catch (err) {
      closed.abort(); // unsubscribes whatever the earlier filters set up
      res.off('close', onGone);
      throw err;
    }
    if (closed.signal.aborted || res.destroyed) {
      // Gone before the acknowledgement: open nothing (no writer, no keep-alive timer, no drain listener).
      closed.abort();
      return;
    }
    res.off('close', onGone);
    const writer = new SseWriter(res, this.config.SSE_KEEPALIVE_MS);
    this.streams.track('stateless', writer);
    // Both listeners go with the stream, so a closed listen keeps neither the writer nor its request alive.
    const offDrain = this.lifecycle.onStreamMustEnd(writer.keepsConnection, () => writer.end());
    writer.onClose(() => {
      offDrain();
      closed.abort();
    });
    writer.send({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: { _meta: tag, notifications: agreed },
    });
    stream.writer = writer;
    for (const message of stream.early.splice(0)) writer.send(message);
  }

  private answersFor(params: Params, method: string, principal: Principal): Record<string, unknown> {
    const responses = params.inputResponses;
    if (responses !== undefined && !isJsonObject(responses)) {
      throw ProtocolError.invalidParams('params.inputResponses must be an object', undefined, 400);
    }
    let earlier: Record<string, unknown> = {};
    if (params.requestState !== undefined) {
      earlier = this.stateCodec.decode(params.requestState, {
        principalId: principal.id,
        method,
        paramsDigest: paramsDigest(params),
      }).answers;
    }
    return { ...earlier, ...(responses ?? {}) };
  }

  private inputRequired(
    signal: InputRequiredSignal,
    params: Params,
    method: string,
    principal: Principal,
    answers: Record<string, unknown>,
  ): Record<string, unknown> {
    const requestState = this.stateCodec.encode({
      principalId: principal.id,
      method,
      paramsDigest: paramsDigest(params),
      expiresAt: Date.now() + this.protocolConfig.MRTR_STATE_TTL_MS,
      answers,
    });
    return { resultType: 'input_required', inputRequests: signal.requests, requestState };
  }

  private decorate(method: string, result: Record<string, unknown>): Record<string, unknown> {
    const out = modernCompleteResult(result);
    if (CACHEABLE_METHODS.has(method) || method === 'server/discover') {
      out.ttlMs ??= this.protocolConfig.LIST_CACHE_TTL_MS;
      out.cacheScope ??= 'private';
    }
    if (method === 'server/discover') delete out.serverInfo;
    return out;
  }
}
