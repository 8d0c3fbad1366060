import type { Response } from 'express';

/**
 * One open Server-Sent Events response. Headers defeat proxy buffering; a comment line every
 * `keepAliveMs` keeps idle connections (and intermediaries) from timing out.
 */
export class SseWriter {
  private closed = false;
  private readonly keepAlive: NodeJS.Timeout;
  private readonly closeListeners: (() => void)[] = [];

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
    // The HTTP edge counts every open stream against its principal's quota (see McpController).
    (res.locals as { onSseOpen?: () => void } | undefined)?.onSseOpen?.();
    this.keepAlive = setInterval(() => this.comment('keep-alive'), keepAliveMs);
    this.keepAlive.unref();
    res.on('close', () => this.markClosed());
    // A client that left while the request was being handled has already fired 'close': without this the
    // keep-alive timer would run for ever.
    if (res.destroyed) this.markClosed();
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
