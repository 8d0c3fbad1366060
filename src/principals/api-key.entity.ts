import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * A service-account API key. Only the SHA-256 of the whole key is stored; `id` is the short public part of
 * the key (`mcpk_<id>_<secret>`) used to find the row.
 */
@Entity({ name: 'api_key' })
export class ApiKey {
  @PrimaryColumn({ type: 'text' })
  id: string;

  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'text' })
  secretSha256: string;

  @Column({ type: 'text', array: true })
  scopes: string[];

  @Column({ type: 'timestamptz' })
  createdAt: Date;

  @Column({ type: 'timestamptz', nullable: true })
  revokedAt: Date | null;
}
