import { Injectable } from '@nestjs/common';
import { EventEmitter } from 'node:events';

/**
 * Process-wide drain state, in two steps. SIGTERM first `announceDrain()`s: readiness answers 503 while
 * requests are still served (each on a connection closed after its answer), so balancers that probe
 * readiness, and nginx's idle upstream connections, move away before anything is refused. After
 * SHUTDOWN_DRAIN_DELAY_MS, `beginDrain()` flips `draining`: new MCP requests are refused, long-lived streams
 * and waits are told to end (they subscribe to 'drain'). In-flight requests are counted so shutdown can wait
 * for them up to SHUTDOWN_GRACE_MS.
 */
@Injectable()
export class LifecycleService {
  private announcedSince: number | undefined;
  private drainingSince: number | undefined;
  private inFlight = 0;
  private readonly events = new EventEmitter();

  /** New requests are refused, streams and waits end. */
  get draining(): boolean {
    return this.drainingSince !== undefined;
  }

  /** Readiness is off and connections close after their answer; requests may still be served. */
  get drainAnnounced(): boolean {
    return this.announcedSince !== undefined;
  }

  announceDrain(): void {
    if (this.announcedSince !== undefined) return;
    this.announcedSince = Date.now();
    this.events.emit('announce');
  }

  /**
   * Runs `listener` when the drain is announced (at once if it already was): the moment SIGTERM arrives,
   * before requests are refused. Work that another instance can take over is released here.
   */
  onDrainAnnounced(listener: () => void): () => void {
    if (this.drainAnnounced) {
      listener();
      return () => undefined;
    }
    this.events.once('announce', listener);
    return () => this.events.off('announce', listener);
  }

  /**
   * For a notification stream (a session's GET stream, a 2026-07-28 listen): `listener` runs when the stream
   * must end. One whose headers went out before the announce (`keepsConnection`: no `Connection: close`)
   * ends at the announce, or at once when it is registered after it: a balancer sends its next request on
   * that connection once the stream ends, and that must happen while this instance still answers (with
   * `Connection: close`), not after it stopped listening. Any other stream ends at the drain, and its
   * connection closes with it.
   */
  onStreamMustEnd(keepsConnection: boolean, listener: () => void): () => void {
    return keepsConnection ? this.onDrainAnnounced(listener) : this.onDrain(listener);
  }

  get inFlightRequests(): number {
    return this.inFlight;
  }

  beginDrain(): void {
    if (this.drainingSince !== undefined) return;
    this.announceDrain();
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
