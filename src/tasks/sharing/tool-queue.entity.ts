import { Column, Entity, Index, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';

/** A tool whose queue an operator paused or resumed (`queue pause|resume`, the console). */
@Entity({ name: 'tool_queue' })
export class ToolQueueRow {
  @PrimaryColumn({ type: 'text' })
  toolName: string;

  @Column({ type: 'boolean' })
  paused: boolean;

  @Column({ type: 'timestamptz', default: () => 'now()' })
  changedAt: Date;

  /** Who paused or resumed it (the operator's actor label). */
  @Column({ type: 'text', nullable: true })
  changedBy: string | null;
}

/** A run start of a tool that declares a rate (`limits.rate`), kept for the length of its interval. */
@Entity({ name: 'tool_run_start' })
@Index('tool_run_start_tool_idx', ['toolName', 'startedAt'])
export class ToolRunStart {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id: string;

  @Column({ type: 'text' })
  toolName: string;

  @Column({ type: 'timestamptz', default: () => 'now()' })
  startedAt: Date;
}
