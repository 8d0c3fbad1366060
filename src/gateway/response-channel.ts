import type { Response } from 'express';
import { randomBytes } from 'node:crypto';
import type { JsonRpcResponse } from '../protocol/json-rpc.js';
import type { SseEventsRepository } from '../sessions/sse-events.repository.js';
import { SseWriter } from './sse-writer.js';
import { formatEventId, type StreamHub } from './stream-hub.service.js';

/** Retry-After of a 503 answer (the database is out of reach): readiness takes about this long to notice. */
export const RETRY_AFTER_S = 2;

/**
 * How the answer to one POSTed request travels back: a plain JSON body when the handler sends nothing
 * before its result, an SSE stream as soon as it emits a notification or a request of its own.
 */
export interface ResponseChannel {
  emit(message: Record<string, unknown>): Promise<void>;
  respond(message: JsonRpcResponse, httpStatus?: number): Promise<void>;
  /** Forces the stream open (a server-to-client request needs somewhere to go). Returns its stream id. */
  openStream(): Promise<string>;
  /** The request was cancelled: close without a JSON-RPC response. */
  abandon(): Promise<void>;
  /** Ends the HTTP response as it stands: the last resort when not even an error can be sent. */
  end(): void;
}

export interface SseSettings {
  keepAliveMs: number;
  retryMs: number;
  /** Told about every SSE stream the channel opens (for the open-streams gauge). */
  onStream?: (writer: SseWriter) => void;
}

/**
 * Legacy era: the stream is resumable. Its events go through the event log (StreamHub), the POST
 * response is the stream's first holder, and a client that lost it reconnects with GET + Last-Event-ID.
 */
export class LegacyChannel implements ResponseChannel {
  private streaming: Promise<void> | undefined;
  private id: string | undefined;
  private writer: SseWriter | undefined;

  constructor(
    private readonly res: Response,
    private readonly sessionId: string,
    private readonly hub: StreamHub,
    private readonly events: SseEventsRepository,
    private readonly sse: SseSettings,
  ) {}

  /** Minted on first use: most requests answer with plain JSON and never open their stream. */
  get streamId(): string {
    this.id ??= `p${randomBytes(9).toString('base64url').replace(/[_]/g, '-')}`;
    return this.id;
  }

  async openStream(): Promise<string> {
    this.streaming ??= (async () => {
      const writer = new SseWriter(this.res, this.sse.keepAliveMs);
      this.writer = writer;
      const primingSeq = await this.events.append(this.sessionId, this.streamId, null);
      writer.prime(formatEventId(this.streamId, primingSeq), this.sse.retryMs);
      this.hub.attach(this.sessionId, this.streamId, writer, primingSeq, true);
    })();
    await this.streaming;
    return this.streamId;
  }

  async emit(message: Record<string, unknown>): Promise<void> {
    await this.openStream();
    await this.hub.publish(this.sessionId, this.streamId, message);
  }

  /** Ends the HTTP response but not the stream: later events wait in the log for a GET with Last-Event-ID. */
  async closeConnection(): Promise<void> {
    await this.openStream();
    this.writer?.end();
  }

  end(): void {
    if (this.writer) this.writer.end();
    else if (!this.res.writableEnded) this.res.end();
  }

  async abandon(): Promise<void> {
    if (!this.streaming) {
      if (!this.res.headersSent && !this.res.destroyed) this.res.status(202).end();
      return;
    }
    await this.streaming;
    await this.hub.publish(this.sessionId, this.streamId, null, true);
  }

  async respond(message: JsonRpcResponse, httpStatus = 200): Promise<void> {
    if (!this.streaming) {
      if (!this.res.headersSent && !this.res.destroyed) {
        if (httpStatus === 503) this.res.setHeader('Retry-After', String(RETRY_AFTER_S));
        this.res.status(httpStatus).json(message);
      }
      return;
    }
    await this.streaming;
    await this.hub.publish(
      this.sessionId,
      this.streamId,
      message as unknown as Record<string, unknown>,
      true,
    );
  }
}

/**
 * 2026-07-28 era: no resumability; notifications related to the request precede the response on a plain
 * SSE stream, and closing it cancels the request.
 */
export class ModernChannel implements ResponseChannel {
  private writer: SseWriter | undefined;
  /** The request was answered (or abandoned): nothing may write to its response any more. */
  private answered = false;

  constructor(
    private readonly res: Response,
    private readonly sse: SseSettings,
  ) {}

  async openStream(): Promise<string> {
    if (!this.writer) {
      this.writer = new SseWriter(this.res, this.sse.keepAliveMs);
      this.sse.onStream?.(this.writer);
    }
    return 'modern';
  }

  async emit(message: Record<string, unknown>): Promise<void> {
    // Work that outlives its answer (a call escalated to a task) must never touch the finished response.
    if (this.answered) return;
    await this.openStream();
    this.writer!.send(message);
  }

  end(): void {
    this.answered = true;
    if (this.writer) this.writer.end();
    else if (!this.res.writableEnded) this.res.end();
  }

  async abandon(): Promise<void> {
    this.answered = true;
    if (this.writer) this.writer.end();
    else if (!this.res.headersSent && !this.res.destroyed) this.res.status(202).end();
  }

  async respond(message: JsonRpcResponse, httpStatus = 200): Promise<void> {
    this.answered = true;
    if (!this.writer) {
      if (!this.res.headersSent && !this.res.destroyed) {
        if (httpStatus === 503) this.res.setHeader('Retry-After', String(RETRY_AFTER_S));
        this.res.status(httpStatus).json(message);
      }
      return;
    }
    this.writer.send(message);
    this.writer.end();
  }
}
