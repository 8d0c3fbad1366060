import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import type { Repository } from 'typeorm';
import { PrincipalRecord } from './principal-record.entity.js';

export type PrincipalSighting = Pick<PrincipalRecord, 'id' | 'provider' | 'issuer' | 'subject'> & {
  displayName?: string;
  email?: string;
};

@Injectable()
export class PrincipalsRepository {
  constructor(@InjectRepository(PrincipalRecord) private readonly repo: Repository<PrincipalRecord>) {}

  /**
   * Creates the principal, or refreshes its name, email and last_seen_at. An existing row is only written
   * when it was last seen more than `minIntervalS` ago or its name or email changed, so replicas that all
   * see the same busy principal do not each write on every request. Returns whether a row was written.
   */
  async recordSeen(p: PrincipalSighting, minIntervalS: number): Promise<boolean> {
    const rows: unknown[] = await this.repo.query(
      `INSERT INTO "principal" AS p ("id", "provider", "issuer", "subject", "display_name", "email",
                                     "created_at", "last_seen_at")
       VALUES ($1, $2, $3, $4, $5, $6, now(), now())
       ON CONFLICT ("id") DO UPDATE SET
         "display_name" = COALESCE(EXCLUDED."display_name", p."display_name"),
         "email" = COALESCE(EXCLUDED."email", p."email"),
         "last_seen_at" = EXCLUDED."last_seen_at"
       WHERE p."last_seen_at" < EXCLUDED."last_seen_at" - make_interval(secs => $7)
          OR p."display_name" IS DISTINCT FROM COALESCE(EXCLUDED."display_name", p."display_name")
          OR p."email" IS DISTINCT FROM COALESCE(EXCLUDED."email", p."email")
       RETURNING p."id"`,
      [p.id, p.provider, p.issuer, p.subject, p.displayName ?? null, p.email ?? null, minIntervalS],
    );
    return rows.length > 0;
  }

  async findById(id: string): Promise<PrincipalRecord | null> {
    return this.repo.findOneBy({ id });
  }
}
