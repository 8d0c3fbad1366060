import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * The SSE event log that makes streams resumable from any instance: every event sent on a session's
 * streams, numbered per stream (`seq`, gap-free in commit order, see SseStream). Retention is bounded per
 * stream.
 */
@Entity({ name: 'mcp_sse_event' })
@Index('mcp_sse_event_created_idx', ['createdAt'])
export class SseEvent {
  @PrimaryColumn({ type: 'text' })
  sessionId: string;

  @PrimaryColumn({ type: 'text' })
  streamId: string;

  @PrimaryColumn({ type: 'bigint' })
  seq: string;

  /** The JSON-RPC message; null for the marker that closes a request stream. */
  @Column({ type: 'jsonb', nullable: true })
  payload: Record<string, unknown> | null;

  @Column({ type: 'boolean', default: false })
  final: boolean;

  @Column({ type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;
}
