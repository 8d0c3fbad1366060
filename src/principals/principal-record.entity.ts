import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * One row per principal ever seen. The id is the stable ownership key that sessions and tasks store; the
 * other columns let operators tell who it is. `last_seen_at` is refreshed at most once a minute.
 */
@Entity({ name: 'principal' })
export class PrincipalRecord {
  @PrimaryColumn({ type: 'text' })
  id: string;

  @Column({ type: 'text' })
  provider: string;

  @Column({ type: 'text', nullable: true })
  issuer: string | null;

  @Column({ type: 'text' })
  subject: string;

  @Column({ type: 'text', nullable: true })
  displayName: string | null;

  @Column({ type: 'text', nullable: true })
  email: string | null;

  @Column({ type: 'timestamptz' })
  createdAt: Date;

  @Column({ type: 'timestamptz' })
  lastSeenAt: Date;
}
