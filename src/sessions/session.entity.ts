import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/** A legacy MCP session (Mcp-Session-Id), persisted so that any instance can serve it. */
@Entity({ name: 'mcp_session' })
@Index('mcp_session_last_seen_idx', ['lastSeenAt'])
// Counting a principal's live sessions (QUOTA_SESSIONS_PER_PRINCIPAL).
@Index('mcp_session_principal_live_idx', ['principalId'], { where: '"ended_at" IS NULL' })
export class McpSession {
  @PrimaryColumn({ type: 'text' })
  id: string;

  @Column({ type: 'text' })
  principalId: string;

  @Column({ type: 'text' })
  protocolVersion: string;

  @Column({ type: 'jsonb', default: () => "'{}'" })
  clientCapabilities: Record<string, unknown>;

  @Column({ type: 'jsonb', nullable: true })
  clientInfo: Record<string, unknown> | null;

  /** Level chosen with logging/setLevel; null means the client never asked, so no log notifications. */
  @Column({ type: 'text', nullable: true })
  logLevel: string | null;

  @Column({ type: 'jsonb', default: () => "'[]'" })
  resourceSubscriptions: string[];

  @Column({ type: 'timestamptz' })
  createdAt: Date;

  @Column({ type: 'timestamptz' })
  lastSeenAt: Date;

  @Column({ type: 'timestamptz', nullable: true })
  endedAt: Date | null;
}
