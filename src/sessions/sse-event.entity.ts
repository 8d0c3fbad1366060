import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/**
 * The SSE event log that makes streams resumable from any instance: every event sent on a session's
 * streams, in global order (`seq`), with the stream it belongs to. Retention is bounded per stream.
 */
@Entity({ name: 'mcp_sse_event' })
@Index('mcp_sse_event_stream_idx', ['sessionId', 'streamId', 'seq'])
@Index('mcp_sse_event_created_idx', ['createdAt'])
export class SseEvent {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  seq: string;

  @Column({ type: 'text' })
  sessionId: string;

  @Column({ type: 'text' })
  streamId: string;

  /** The JSON-RPC message; null for the marker that closes a request stream. */
  @Column({ type: 'jsonb', nullable: true })
  payload: Record<string, unknown> | null;

  @Column({ type: 'boolean', default: false })
  final: boolean;

  @Column({ type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;
}
