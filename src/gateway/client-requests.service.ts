import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { PgBusService } from '../bus/pg-bus.service.js';
import { AppConfig } from '../config/app-config.js';
import type { JsonRpcResponse } from '../protocol/json-rpc.js';
import { ClientResponsesRepository } from '../sessions/client-responses.repository.js';
import { McpProtocolError } from '../tool-dispatch/tool-context.js';
import { RetryBackoff } from './retry-backoff.js';
import { StreamHub } from './stream-hub.service.js';
import { captureTraceContext } from '../telemetry/trace-context.js';

const CHANNEL = 'mcp_client_response';

interface Waiter {
  resolve(result: Record<string, unknown>): void;
  reject(err: Error): void;
  /** Collecting a parked answer that failed is tried again until it succeeds or the wait ends. */
  retry: RetryBackoff;
}

/**
 * Server-to-client requests of the handshake era (elicitation, sampling, roots). The request goes out on
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
    private readonly config: AppConfig,
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
        this.waiters.delete(k);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.set(k, {
        resolve: (r) => {
          settle();
          resolve(r);
        },
        reject: (e) => {
          settle();
          reject(e);
        },
        retry,
      });
    });
    // MCP trace conventions: a request the server sends carries the server's own trace context in _meta.
    const traced = captureTraceContext();
    const meta = typeof params._meta === 'object' && params._meta !== null ? params._meta : {};
    const sent = traced ? { ...params, _meta: { ...meta, ...traced } } : params;
    await this.hub.publish(sessionId, streamId, { jsonrpc: '2.0', id, method, params: sent });
    return result;
  }

  /** A JSON-RPC response POSTed by the client. Returns false when it answers nothing we asked. */
  async deliver(sessionId: string, response: JsonRpcResponse): Promise<boolean> {
    if (typeof response.id !== 'string' || !response.id.startsWith('srv-')) return false;
    const waiter = this.waiters.get(key(sessionId, response.id));
    if (waiter) {
      this.settle(waiter, response);
      return true;
    }
    await this.parked.park(sessionId, response.id, response as unknown as Record<string, unknown>);
    await this.bus.publish(CHANNEL, { s: sessionId, r: response.id });
    return true;
  }

  private async collect(sessionId: string, requestId: string): Promise<void> {
    const waiter = this.waiters.get(key(sessionId, requestId));
    if (!waiter) return;
    try {
      const payload = await this.parked.take(sessionId, requestId);
      waiter.retry.succeeded();
      if (payload) this.settle(waiter, payload as unknown as JsonRpcResponse);
    } catch (err) {
      // The row stays parked, and the NOTIFY that announced it is spent: try again until the wait ends.
      this.logger.warn(
        `could not collect a client response: ${err instanceof Error ? err.message : String(err)}; retrying`,
      );
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
