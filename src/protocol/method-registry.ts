import { Injectable } from '@nestjs/common';
import type { Principal } from '../principals/principal.js';
import type { Era, McpRequestContext } from './request-context.js';

type Params = Record<string, unknown>;

/** Serves one JSON-RPC method. Legacy (2025-11-25) requests carry their session in `ctx.session`. */
export type MethodHandler = (params: Params, ctx: McpRequestContext) => Promise<Record<string, unknown>>;

/**
 * Validates one subscriptions/listen filter (modern era, 2026-07-28), starts delivering for it, and returns
 * what the acknowledgement echoes.
 */
export type ListenFilter = (
  filter: unknown,
  ctx: { principal: Principal; clientCapabilities: Params; signal: AbortSignal },
  send: (method: string, params: Params) => void,
) => Promise<unknown>;

export interface MethodOptions {
  /** The eras that serve the method: a method outside its eras is answered as unknown (-32601). */
  eras: readonly Era[];
}

/**
 * The one place that answers "who serves method X in era Y?". Feature modules register their own methods at
 * module init (tool dispatch methods, sessions and logging, the tasks protocol); the era handlers in
 * `gateway/` only look them up. A method registered twice for one era is a wiring bug and stops startup.
 */
@Injectable()
export class MethodRegistry {
  private readonly handlers: Record<Era, Map<string, MethodHandler>> = {
    legacy: new Map(),
    modern: new Map(),
  };
  private readonly filters = new Map<string, ListenFilter>();

  register(method: string, handler: MethodHandler, options: MethodOptions): void {
    for (const era of options.eras) {
      if (this.handlers[era].has(method)) {
        throw new Error(`MCP method ${method} is registered twice for the ${era} era`);
      }
      this.handlers[era].set(method, handler);
    }
  }

  /** The handler of `method` in `era`, or undefined when that era does not serve it. */
  handler(method: string, era: Era): MethodHandler | undefined {
    return this.handlers[era].get(method);
  }

  /** Lets a feature honour a subscriptions/listen filter (the tasks extension's `taskIds`). */
  registerListenFilter(key: string, filter: ListenFilter): void {
    if (this.filters.has(key)) throw new Error(`listen filter ${key} is registered twice`);
    this.filters.set(key, filter);
  }

  /** Every listen filter, in registration order. */
  listenFilters(): ReadonlyMap<string, ListenFilter> {
    return this.filters;
  }
}
