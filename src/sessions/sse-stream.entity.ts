import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * The counter of one SSE stream: the seq of its newest event. An append bumps it with UPDATE … RETURNING in
 * the same transaction as the event's INSERT, so the row lock orders appends of one stream by commit, and a
 * reader that drains `seq > lastSeq` can never see event n+1 before event n is visible. A counter at 0 has
 * issued no id: only outbox appends came, which log nothing until a stream's priming event numbers it 1.
 */
@Entity({ name: 'mcp_sse_stream' })
export class SseStream {
  @PrimaryColumn({ type: 'text' })
  sessionId: string;

  @PrimaryColumn({ type: 'text' })
  streamId: string;

  @Column({ type: 'bigint' })
  lastSeq: string;
}
