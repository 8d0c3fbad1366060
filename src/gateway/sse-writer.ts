import type { Request, Response } from 'express';
import type { RequestWithPrincipal } from '../principals/principal.js';

/**
 * One open Server-Sent Events response. Headers defeat proxy buffering; a comment line every
 * `keepAliveMs` keeps idle connections (and intermediaries) from timing out.
 */
export class SseWriter {
  private closed = false;
  private readonly keepAlive: NodeJS.Timeout;
  private readonly closeListeners: (() => void)[] = [];
  /**
   * Its headers went out without `Connection: close` (no drain was announced yet), so its connection outlives
   * it and a balancer will send another request on it: a drain ends such a notification stream at its
   * announce, while that request is still answered (LifecycleService.onStreamMustEnd).
   */
  readonly keepsConnection: boolean;

  constructor(
    private readonly res: Response,
    keepAliveMs: number,
    extraHeaders: Record<string, string> = {},
  ) {
    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache, no-transform');
    res.setHeader('Connection', 'keep-alive');
    res.setHeader('X-Accel-Buffering', 'no');
    for (const [k, v] of Object.entries(extraHeaders)) res.setHeader(k, v);
    res.flushHeaders();
    // The HTTP edge turned it into `Connection: close` if a drain was announced (configureApp).
    this.keepsConnection = res.getHeader('connection') !== 'close';
    // The HTTP edge counts every open stream against its principal's quota (see McpController).
    (res.locals as { onSseOpen?: () => void } | undefined)?.onSseOpen?.();
    // The auth guard left the credential check on the request that opened this stream (RequestWithPrincipal).
    const credentialValid = (res.req as (Request & RequestWithPrincipal) | undefined)?.credentialValid;
    this.keepAlive = setInterval(() => this.tick(credentialValid), keepAliveMs);
    this.keepAlive.unref();
    res.on('close', () => this.markClosed());
    // A client that left while the request was being handled has already fired 'close': without this the
    // keep-alive timer would run for ever.
    if (res.destroyed) this.markClosed();
  }

  /**
   * Each keep-alive first re-checks the credential the stream was opened with: an expired token or a revoked
   * API key stops receiving here, at the latest one keep-alive period after it lapsed.
   */
  private tick(credentialValid: (() => Promise<boolean>) | undefined): void {
    if (!credentialValid) return this.comment('keep-alive');
    credentialValid().then(
      (valid) => (valid ? this.comment('keep-alive') : this.end()),
      () => this.comment('keep-alive'),
    );
  }

  get isOpen(): boolean {
    return !this.closed && !this.res.writableEnded && !this.res.destroyed;
  }

  onClose(listener: () => void): void {
    if (this.closed) listener();
    else this.closeListeners.push(listener);
  }

  /** The priming event: an id the client can resume from, a reconnect delay, empty data. */
  prime(eventId: string, retryMs: number): void {
    this.raw(`id: ${eventId}\nretry: ${retryMs}\ndata: \n\n`);
  }

  send(message: unknown, eventId?: string): void {
    const idLine = eventId ? `id: ${eventId}\n` : '';
    this.raw(`event: message\n${idLine}data: ${JSON.stringify(message)}\n\n`);
  }

  comment(text: string): void {
    this.raw(`: ${text}\n\n`);
  }

  end(): void {
    if (this.closed) return;
    this.res.end();
    this.markClosed();
  }

  private raw(chunk: string): void {
    if (!this.isOpen) return;
    this.res.write(chunk);
  }

  private markClosed(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.keepAlive);
    for (const l of this.closeListeners.splice(0)) l();
  }
}
