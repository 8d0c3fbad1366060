import { Check, Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/**
 * One row of the audit trail (migration AuditTrail1765300000000 says what each column means). Append-only:
 * only the audit repositories read it, AuditTrail writes it, and only the janitor's retention deletes from it.
 */
@Entity({ name: 'mcp_audit_event' })
@Index('audit_event_at_idx', ['at'])
@Index('audit_event_task_idx', ['taskId', 'id'])
@Index('audit_event_principal_idx', ['principal', 'id'])
@Index('audit_event_tool_idx', ['tool', 'id'])
@Check('audit_event_actor_check', `"actor" IN ('owner', 'operator', 'janitor', 'worker', 'system')`)
export class AuditEventRow {
  /** bigint comes back from pg as a string. */
  @PrimaryGeneratedColumn('identity', { type: 'bigint', generatedIdentity: 'ALWAYS' })
  id: string;

  @Column({ type: 'timestamptz', default: () => 'clock_timestamp()' })
  at: Date;

  @Column({ type: 'text' })
  kind: string;

  @Column({ type: 'text' })
  actor: string;

  @Column({ type: 'text', nullable: true })
  principal: string | null;

  @Column({ type: 'text', nullable: true })
  taskId: string | null;

  @Column({ type: 'text', nullable: true })
  sessionId: string | null;

  @Column({ type: 'text', nullable: true })
  tool: string | null;

  @Column({ type: 'text', nullable: true })
  era: string | null;

  @Column({ type: 'text', nullable: true })
  status: string | null;

  @Column({ type: 'text', nullable: true })
  previousStatus: string | null;

  @Column({ type: 'integer', nullable: true })
  attempt: number | null;

  @Column({ type: 'text', nullable: true })
  instanceId: string | null;

  @Column({ type: 'text', nullable: true })
  traceId: string | null;

  @Column({ type: 'text', nullable: true })
  requestId: string | null;

  @Column({ type: 'jsonb', nullable: true })
  detail: Record<string, unknown> | null;
}
