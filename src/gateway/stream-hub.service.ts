import { Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { SqlTx } from '../database/sql-transaction.js';
import { PgBusService } from '../bus/pg-bus.service.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import { SseEventsRepository } from '../sessions/sse-events.repository.js';
import { RetryBackoff } from '../common/retry-backoff.js';
import type { SseWriter } from './sse-writer.js';
import { SseStreams } from './sse-streams.service.js';
import { errorMessage } from '../common/error-message.js';
import { GatewayConfig } from './gateway.config.js';

const CHANNEL = 'mcp_stream';
export const STANDALONE_STREAM = 'g';
const MAX_BIGINT = 2n ** 63n - 1n;
/** Streams remembered for a wake-up retry at most (each entry is two ids; see announce). */
const MAX_UNANNOUNCED = 10000;

/**
 * SSE event ids are `<streamId>_<seq>`: unique across the session (stream ids are unique in it, seqs in a
 * stream) and naming their stream, so Last-Event-ID resumes exactly that stream.
 */
export function formatEventId(streamId: string, seq: string): string {
  return `${streamId}_${seq}`;
}

export function parseEventId(id: string): { streamId: string; seq: string } | undefined {
  const m = /^([A-Za-z0-9-]{1,64})_(\d{1,20})$/.exec(id.trim());
  // seq is a PostgreSQL bigint: a larger number names no event (and must not reach the query).
  if (!m || BigInt(m[2]) > MAX_BIGINT) return undefined;
  return { streamId: m[1], seq: m[2] };
}

interface Holder {
  writer: SseWriter;
  lastSeq: string;
  draining: Promise<void>;
  dirty: boolean;
  /** Request streams end after their final event; the standalone stream stays open. */
  endOnFinal: boolean;
  /** A drain that failed (a pooled read, while the LISTEN connection may be fine) is tried again. */
  retry: RetryBackoff;
}

/**
 * Every SSE message of a legacy session goes through here: it is appended to the event log, then
 * whoever holds that stream's connection (on this instance or another, woken over the bus) reads the log
 * from where it stopped and writes the events in order. A dropped stream is resumed with Last-Event-ID
 * on any instance by attaching a new holder after that event.
 */
@Injectable()
export class StreamHub implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(StreamHub.name);
  private readonly holders = new Map<string, Holder>();
  /** Streams whose events are logged but whose holder elsewhere could not be woken yet (see announce). */
  private readonly unannounced = new Set<string>();
  private readonly announceRetry = new RetryBackoff(() => void this.announceAgain());

  constructor(
    private readonly events: SseEventsRepository,
    private readonly bus: PgBusService,
    private readonly config: GatewayConfig,
    private readonly lifecycle: LifecycleService,
    private readonly streams: SseStreams,
  ) {}

  onModuleInit(): void {
    this.bus.subscribe(CHANNEL, (p) => {
      if (typeof p.s === 'string' && typeof p.st === 'string') this.wake(p.s, p.st);
    });
    this.bus.onResync(() => {
      for (const key of this.holders.keys()) {
        const [s, st] = key.split('\u0000');
        this.wake(s, st);
      }
    });
    // Standalone streams whose connections outlive them end at the announce (LifecycleService.onStreamMustEnd;
    // one attached later ends at once, see attach); request streams end after their final event, or at the
    // drain with every other stream.
    this.lifecycle.onDrainAnnounced(() => {
      for (const h of this.holders.values()) if (this.endsAtAnnounce(h)) h.writer.end();
    });
    this.lifecycle.onDrain(() => {
      for (const h of this.holders.values()) h.writer.end();
    });
  }

  onApplicationShutdown(): void {
    this.announceRetry.stop();
  }

  /** Appends a message to a stream and wakes its holder wherever it is. Returns the event id. */
  async publish(
    sessionId: string,
    streamId: string,
    message: Record<string, unknown> | null,
    final = false,
  ): Promise<string> {
    const seq = await this.events.append(sessionId, streamId, message, final);
    this.pruneNowAndThen(sessionId, streamId, seq);
    if (this.holders.has(key(sessionId, streamId))) this.wake(sessionId, streamId);
    else await this.announce(key(sessionId, streamId));
    return formatEventId(streamId, seq);
  }

  /**
   * Wakes the stream's holder elsewhere. The event is logged already, so a NOTIFY that fails (a pooled
   * connection cut under it) is not the caller's error: the stream is remembered and announced again with
   * backoff until a NOTIFY goes through (one for the stream covers every event logged before it).
   */
  private async announce(k: string): Promise<void> {
    try {
      await this.notify(k);
    } catch (err) {
      this.logger.warn(`stream wake-up failed: ${errorMessage(err)}; retrying`);
      if (this.unannounced.size >= MAX_UNANNOUNCED) {
        // Bounded: such a stream is sent at its holder's next wake-up or resync instead.
        this.logger.warn(`more than ${MAX_UNANNOUNCED} streams wait for a wake-up; not remembering more`);
        return;
      }
      this.unannounced.add(k);
      this.announceRetry.failed();
    }
  }

  private async announceAgain(): Promise<void> {
    for (const k of [...this.unannounced]) {
      try {
        await this.notify(k);
        this.unannounced.delete(k);
      } catch {
        this.announceRetry.failed();
        return;
      }
    }
    this.announceRetry.succeeded();
  }

  private notify(k: string): Promise<void> {
    const [s, st] = k.split('\u0000');
    return this.bus.publish(CHANNEL, { s, st });
  }

  /**
   * Appends a message inside the caller's transaction (an outbox), in its COMMIT's round trip: the event
   * exists if and only if that transaction commits, whatever happens to this process or its LISTEN
   * connection afterwards. No wake-up of its own: the caller's change is already announced on the bus at
   * that commit, and the caller wakes the holder from that (see wakeHolder); if the NOTIFY is lost, the
   * resync after the bus reconnects drains every stream held here.
   */
  publishInTransaction(
    tx: SqlTx,
    sessionId: string,
    streamId: string,
    message: Record<string, unknown>,
  ): void {
    this.events.appendAtCommit(tx, sessionId, streamId, message);
    // The seq is not known here; about one in a hundred appends prunes, as the numbered ones do below.
    if (Math.random() < 0.01) this.pruneSoon(sessionId, streamId);
  }

  /** Wakes this instance's holder of a stream, if any, to drain the log (after a change announced elsewhere). */
  wakeHolder(sessionId: string, streamId: string): void {
    if (this.holders.has(key(sessionId, streamId))) this.wake(sessionId, streamId);
  }

  private pruneNowAndThen(sessionId: string, streamId: string, seq: string): void {
    if (Number(seq) % 100 === 0) this.pruneSoon(sessionId, streamId);
  }

  private pruneSoon(sessionId: string, streamId: string): void {
    void this.events
      .pruneStream(sessionId, streamId, this.config.SSE_STREAM_RETENTION)
      .catch(() => undefined);
  }

  hasLocalHolder(sessionId: string, streamId: string): boolean {
    const h = this.holders.get(key(sessionId, streamId));
    return !!h && h.writer.isOpen;
  }

  private endsAtAnnounce(h: Holder): boolean {
    return !h.endOnFinal && h.writer.keepsConnection;
  }

  /**
   * Makes `writer` the holder of a stream and sends every logged event after `afterSeq`, then live ones.
   * A newer holder replaces an older one (the client reconnected).
   */
  attach(
    sessionId: string,
    streamId: string,
    writer: SseWriter,
    afterSeq: string,
    endOnFinal: boolean,
  ): void {
    const k = key(sessionId, streamId);
    const previous = this.holders.get(k);
    if (previous && previous.writer !== writer) previous.writer.end();
    const holder: Holder = {
      writer,
      lastSeq: afterSeq,
      draining: Promise.resolve(),
      dirty: false,
      endOnFinal,
      retry: new RetryBackoff(() => this.wake(sessionId, streamId)),
    };
    this.holders.set(k, holder);
    this.streams.track(endOnFinal ? 'request' : 'standalone', writer);
    writer.onClose(() => {
      holder.retry.stop();
      if (this.holders.get(k) === holder) this.holders.delete(k);
    });
    // A drain that began, or one announced since its headers went out (while its priming was logged), has
    // already ended the streams it would end: this one ends now, and the client resumes it elsewhere.
    if (this.lifecycle.draining || (this.lifecycle.drainAnnounced && this.endsAtAnnounce(holder)))
      writer.end();
    else this.wake(sessionId, streamId);
  }

  private wake(sessionId: string, streamId: string): void {
    const holder = this.holders.get(key(sessionId, streamId));
    if (!holder) return;
    if (holder.dirty) return; // a drain is queued and will see the new rows
    holder.dirty = true;
    holder.draining = holder.draining.then(() => this.drain(sessionId, streamId, holder));
  }

  private async drain(sessionId: string, streamId: string, holder: Holder): Promise<void> {
    holder.dirty = false;
    try {
      for (;;) {
        if (!holder.writer.isOpen) return;
        const rows = await this.events.readAfter(sessionId, streamId, holder.lastSeq);
        for (const row of rows) {
          holder.lastSeq = row.seq;
          if (row.payload) {
            holder.writer.send(row.payload, formatEventId(streamId, row.seq));
            this.streams.delivered(row.createdAt);
          }
          if (row.final && holder.endOnFinal) {
            holder.writer.end();
            return;
          }
        }
        if (rows.length < 500) break;
      }
      holder.retry.succeeded();
    } catch (err) {
      // The wake-up that asked for this drain is spent; without a retry the events already logged would wait
      // for the next change or a LISTEN reconnect, which may never come.
      this.logger.warn(`stream drain failed: ${errorMessage(err)}; retrying`);
      holder.retry.failed();
    }
  }
}

function key(sessionId: string, streamId: string): string {
  return `${sessionId}\u0000${streamId}`;
}
