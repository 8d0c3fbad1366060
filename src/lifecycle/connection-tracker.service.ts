import { Injectable } from '@nestjs/common';
import { EventEmitter } from 'node:events';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { LifecycleConfig } from './lifecycle.config.js';
import { LifecycleService } from './lifecycle.service.js';

interface Connection {
  /** Accepted while the instance was not draining yet: every request on it is served, even during the drain. */
  readonly acceptedBeforeDrain: boolean;
  /** Requests read from it and not yet answered (HTTP/1.1 pipelining allows more than one). */
  busy: number;
  /** When its last answer went out (its accept time before the first). */
  idleSince: number;
  closeTimer?: NodeJS.Timeout;
}

/**
 * The HTTP connections of this instance, so that a drain never closes one under a request a balancer is
 * sending on it. A connection whose last answer did not say `Connection: close` (its headers went out before
 * the drain was announced: an SSE answer, a stream) may be reused by the balancer at any moment until the
 * balancer's own idle timeout closes it. Ending it from this side races that request: nginx logs "upstream
 * prematurely closed connection" and cannot retry a POST it has sent. So, once the instance stops listening,
 * this side ends a connection only after it has been idle for SHUTDOWN_DRAIN_DELAY_MS, which the setting
 * requires to be longer than the balancer's idle keep-alive; a request that arrives on it before then is
 * served, and its answer says `Connection: close`. New connections cannot arrive then (the listener is closed);
 * one accepted just before the close is served too.
 */
@Injectable()
export class ConnectionTracker {
  private readonly open = new Map<Socket, Connection>();
  private closingIdle = false;
  /** Emits 'empty' when the last tracked connection closes. */
  private readonly events = new EventEmitter();

  constructor(
    private readonly lifecycle: LifecycleService,
    private readonly config: LifecycleConfig,
  ) {}

  /** Tracks every connection `server` accepts from now on. */
  attach(server: Server): void {
    server.on('connection', (socket: Socket) => {
      this.open.set(socket, {
        acceptedBeforeDrain: !this.lifecycle.draining,
        busy: 0,
        idleSince: Date.now(),
      });
      socket.once('close', () => this.forget(socket));
    });
  }

  /**
   * A request arrived on `socket`; returns whether it is served although the instance drains (its connection
   * was accepted before the drain began). Pair with `answered` once its response finished or was cut.
   */
  requestStarted(socket: Socket): boolean {
    const conn = this.open.get(socket);
    if (!conn) return false;
    conn.busy++;
    clearTimeout(conn.closeTimer);
    conn.closeTimer = undefined;
    return conn.acceptedBeforeDrain;
  }

  answered(socket: Socket): void {
    const conn = this.open.get(socket);
    if (!conn) return;
    conn.busy = Math.max(0, conn.busy - 1);
    if (conn.busy > 0) return;
    conn.idleSince = Date.now();
    // An answer that said `Connection: close` is followed by Node's own close; this one is kept.
    if (this.closingIdle) this.scheduleEnd(socket, conn);
  }

  /**
   * From now on (the listener is closed), a connection is ended once it has been idle for the drain delay:
   * at once for one idle that long already, later for one answered recently or busy now.
   */
  closeIdleConnections(): void {
    this.closingIdle = true;
    for (const [socket, conn] of this.open) if (conn.busy === 0) this.scheduleEnd(socket, conn);
  }

  /** Resolves when every connection is closed (by the peer, or ended idle), or after `timeoutMs`. */
  async allClosed(timeoutMs: number): Promise<boolean> {
    if (this.open.size === 0) return true;
    return new Promise((resolve) => {
      const onEmpty = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.events.off('empty', onEmpty);
        resolve(false);
      }, timeoutMs);
      this.events.once('empty', onEmpty);
    });
  }

  private scheduleEnd(socket: Socket, conn: Connection): void {
    clearTimeout(conn.closeTimer);
    const wait = conn.idleSince + this.config.SHUTDOWN_DRAIN_DELAY_MS - Date.now();
    if (wait <= 0) {
      socket.end();
      return;
    }
    conn.closeTimer = setTimeout(() => {
      if (conn.busy === 0) socket.end();
    }, wait);
    conn.closeTimer.unref();
  }

  private forget(socket: Socket): void {
    const conn = this.open.get(socket);
    if (conn) clearTimeout(conn.closeTimer);
    this.open.delete(socket);
    if (this.open.size === 0) this.events.emit('empty');
  }
}
