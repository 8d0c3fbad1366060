import { Injectable, type OnModuleInit } from '@nestjs/common';
import { PgBusService } from '../bus/pg-bus.service.js';

const CHANNEL = 'mcp_cancel_request';

/**
 * Requests being handled on this instance, so `notifications/cancelled` (which may arrive at any instance)
 * and server drain can abort them.
 */
@Injectable()
export class InFlightService implements OnModuleInit {
  private readonly running = new Map<string, AbortController>();

  constructor(private readonly bus: PgBusService) {}

  onModuleInit(): void {
    this.bus.subscribe(CHANNEL, (p) => {
      if (typeof p.s === 'string' && (typeof p.r === 'string' || typeof p.r === 'number')) {
        this.abortLocal(p.s, String(p.r), 'cancelled by the client');
      }
    });
  }

  /** Registers a request; the returned controller aborts on cancel. Call `done` when it finishes. */
  start(scope: string, requestId: string | number): { controller: AbortController; done: () => void } {
    const k = `${scope}\u0000${String(requestId)}`;
    const controller = new AbortController();
    this.running.set(k, controller);
    return {
      controller,
      done: () => {
        if (this.running.get(k) === controller) this.running.delete(k);
      },
    };
  }

  async cancel(scope: string, requestId: string | number, reason: string): Promise<void> {
    if (!this.abortLocal(scope, String(requestId), reason)) {
      await this.bus.publish(CHANNEL, { s: scope, r: String(requestId) });
    }
  }

  get size(): number {
    return this.running.size;
  }

  private abortLocal(scope: string, requestId: string, reason: string): boolean {
    const c = this.running.get(`${scope}\u0000${requestId}`);
    if (!c) return false;
    c.abort(new Error(reason));
    return true;
  }

  /** Used at the end of the drain grace period. */
  abortAll(reason: string): void {
    for (const c of this.running.values()) c.abort(new Error(reason));
  }
}
