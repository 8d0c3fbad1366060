import { Injectable } from '@nestjs/common';
import { EventEmitter } from 'node:events';

/**
 * Process-wide drain state. SIGTERM flips `draining`: readiness answers 503 at once, new MCP requests are
 * refused, and long-lived streams are told to close (they subscribe to 'drain'). In-flight requests are
 * counted so shutdown can wait for them up to SHUTDOWN_GRACE_MS.
 */
@Injectable()
export class LifecycleService {
  private drainingSince: number | undefined;
  private inFlight = 0;
  private readonly events = new EventEmitter();

  get draining(): boolean {
    return this.drainingSince !== undefined;
  }

  get inFlightRequests(): number {
    return this.inFlight;
  }

  beginDrain(): void {
    if (this.drainingSince !== undefined) return;
    this.drainingSince = Date.now();
    this.events.emit('drain');
  }

  onDrain(listener: () => void): () => void {
    if (this.draining) {
      listener();
      return () => undefined;
    }
    this.events.once('drain', listener);
    return () => this.events.off('drain', listener);
  }

  /** Listeners waiting for the drain (each open stream holds one; diagnostics and leak tests). */
  get drainListenerCount(): number {
    return this.events.listenerCount('drain');
  }

  requestStarted(): void {
    this.inFlight++;
  }

  requestFinished(): void {
    this.inFlight = Math.max(0, this.inFlight - 1);
    if (this.inFlight === 0) this.events.emit('idle');
  }

  /** Resolves when no counted request is in flight, or after `graceMs`; returns whether it went idle. */
  async waitForIdle(graceMs: number): Promise<boolean> {
    if (this.inFlight === 0) return true;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.events.off('idle', onIdle);
        resolve(false);
      }, graceMs);
      const onIdle = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      this.events.once('idle', onIdle);
    });
  }
}
