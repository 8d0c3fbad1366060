import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { PgBusService } from '../bus/pg-bus.service.js';
import { JSONRPC, type JsonRpcResponse } from '../protocol/json-rpc.js';
import { ProtocolError } from '../protocol/protocol.errors.js';
import { jsonBytes, QuotaService } from '../quotas/quota.service.js';
import { ClientResponsesRepository } from '../sessions/client-responses.repository.js';
import { McpProtocolError } from '../tool-dispatch/tool-context.js';
import { RetryBackoff } from '../common/retry-backoff.js';
import { StreamHub } from './stream-hub.service.js';
import { captureTraceContext } from '../telemetry/trace-context.js';
import { errorMessage } from '../common/error-message.js';
import { QuotasConfig } from '../quotas/quotas.config.js';
import { SessionsConfig } from '../sessions/sessions.config.js';

const CHANNEL = 'mcp_client_response';

interface Waiter {
  resolve(result: Record<string, unknown>): void;
  reject(err: Error): void;
  /** Collecting a parked answer that failed is tried again until it succeeds or the wait ends. */
  retry: RetryBackoff;
  /** Set when the answer came out of the table: its row is gone, nothing to forget. */
  taken?: boolean;
}

/** A POSTed response that answers nothing this session is waiting for. */
function notAwaited(): ProtocolError {
  return new ProtocolError(
    JSONRPC.INVALID_REQUEST,
    'Invalid Request: no request of this session awaits this response (never sent, already answered, or timed out)',
    400,
  );
}

/**
 * Server-to-client requests of the legacy era (elicitation, sampling, roots). The request goes out on
 * the stream of the call that needs it; the client POSTs the response to any instance. If the waiting
 * handler runs elsewhere, the response is parked in a table and the waiter is woken over the bus.
 */
@Injectable()
export class ClientRequestsService implements OnModuleInit {
  private readonly logger = new Logger(ClientRequestsService.name);
  private readonly waiters = new Map<string, Waiter>();

  constructor(
    private readonly hub: StreamHub,
    private readonly bus: PgBusService,
    private readonly parked: ClientResponsesRepository,
    private readonly config: SessionsConfig,
    private readonly quotasConfig: QuotasConfig,
    private readonly quotas: QuotaService,
  ) {}

  onModuleInit(): void {
    this.bus.subscribe(CHANNEL, (p) => {
      if (typeof p.s === 'string' && typeof p.r === 'string') void this.collect(p.s, p.r);
    });
    this.bus.onResync(() => {
      for (const k of this.waiters.keys()) {
        const [s, r] = k.split('\u0000');
        void this.collect(s, r);
      }
    });
  }

  async request(
    sessionId: string,
    streamId: string,
    method: string,
    params: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<Record<string, unknown>> {
    signal.throwIfAborted();
    const id = `srv-${randomBytes(12).toString('base64url')}`;
    const k = key(sessionId, id);
    const retry = new RetryBackoff(() => void this.collect(sessionId, id));
    // Recorded before the client can see the request, so its answer is recognised at whichever instance
    // it arrives; an answer to anything not recorded is refused, never stored.
    await this.parked.expect(sessionId, id);
    const result = new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => {
        settle();
        reject(
          new McpProtocolError(
            -32001,
            `The client did not answer ${method} within ${this.config.CLIENT_REQUEST_TIMEOUT_MS} ms`,
          ),
        );
      }, this.config.CLIENT_REQUEST_TIMEOUT_MS);
      const onAbort = (): void => {
        settle();
        reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      };
      const settle = (): void => {
        clearTimeout(timer);
        retry.stop();
        signal.removeEventListener('abort', onAbort);
        if (!waiter.taken) this.forget(sessionId, id);
        this.waiters.delete(k);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      const waiter: Waiter = {
        resolve: (r) => {
          settle();
          resolve(r);
        },
        reject: (e) => {
          settle();
          reject(e);
        },
        retry,
      };
      this.waiters.set(k, waiter);
    });
    // MCP trace conventions: a request the server sends carries the server's own trace context in _meta.
    const traced = captureTraceContext();
    const meta = typeof params._meta === 'object' && params._meta !== null ? params._meta : {};
    const sent = traced ? { ...params, _meta: { ...meta, ...traced } } : params;
    try {
      await this.hub.publish(sessionId, streamId, { jsonrpc: '2.0', id, method, params: sent });
    } catch (err) {
      // Never sent: nothing will answer it, so it must not wait (nor stay recorded) until its timeout.
      this.waiters.get(k)?.reject(err instanceof Error ? err : new Error(String(err)));
    }
    return result;
  }

  /**
   * A JSON-RPC response POSTed by the client. Handed to the waiter when it runs here; otherwise stored for
   * it only if the session has that request outstanding and the answer fits the session's quota of parked
   * answers. Anything else is refused: 400 for an answer nothing awaits, 413 past the quota.
   */
  async deliver(sessionId: string, response: JsonRpcResponse): Promise<void> {
    if (typeof response.id !== 'string' || !response.id.startsWith('srv-')) throw notAwaited();
    const waiter = this.waiters.get(key(sessionId, response.id));
    if (waiter) {
      waiter.taken = true;
      this.settle(waiter, response);
      // The record goes before the 202, so a repeated answer at any instance finds nothing to answer.
      await this.forgetting(sessionId, response.id);
      return;
    }
    const payload = response as unknown as Record<string, unknown>;
    const bytes = jsonBytes(payload);
    const limit = this.quotasConfig.QUOTA_CLIENT_RESPONSE_BYTES_PER_SESSION;
    const verdict = await this.parked.park(
      sessionId,
      response.id,
      payload,
      bytes,
      limit,
      this.config.CLIENT_REQUEST_TIMEOUT_MS,
    );
    switch (verdict.kind) {
      case 'parked':
        await this.bus.publish(CHANNEL, { s: sessionId, r: response.id });
        return;
      case 'not_awaited':
        throw notAwaited();
      case 'over_quota':
        throw this.quotas.refuse(
          'client_response_bytes',
          `Too large: ${bytes} bytes with the ${verdict.stored} already parked for this session exceed QUOTA_CLIENT_RESPONSE_BYTES_PER_SESSION = ${limit}`,
          limit,
          'QUOTA_CLIENT_RESPONSE_BYTES_PER_SESSION',
          413,
        );
    }
  }

  private forget(sessionId: string, requestId: string): void {
    void this.forgetting(sessionId, requestId);
  }

  /** Best effort: a row left behind is outstanding no longer past its timeout, and the janitor deletes it. */
  private async forgetting(sessionId: string, requestId: string): Promise<void> {
    try {
      await this.parked.forget(sessionId, requestId);
    } catch (err) {
      this.logger.warn(`could not forget a server-to-client request: ${errorMessage(err)}`);
    }
  }

  private async collect(sessionId: string, requestId: string): Promise<void> {
    const waiter = this.waiters.get(key(sessionId, requestId));
    if (!waiter) return;
    try {
      const payload = await this.parked.take(sessionId, requestId);
      waiter.retry.succeeded();
      if (payload) {
        waiter.taken = true;
        this.settle(waiter, payload as unknown as JsonRpcResponse);
      }
    } catch (err) {
      // The row stays parked, and the NOTIFY that announced it is spent: try again until the wait ends.
      this.logger.warn(`could not collect a client response: ${errorMessage(err)}; retrying`);
      waiter.retry.failed();
    }
  }

  private settle(waiter: Waiter, response: JsonRpcResponse): void {
    if (response.error) {
      waiter.reject(new McpProtocolError(response.error.code, response.error.message, response.error.data));
    } else {
      waiter.resolve(response.result ?? {});
    }
  }
}

function key(sessionId: string, requestId: string): string {
  return `${sessionId}\u0000${requestId}`;
}
