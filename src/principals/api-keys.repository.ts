import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import type { Repository } from 'typeorm';
import { AuditTrail } from '../audit/audit-trail.service.js';
import { ApiKey } from './api-key.entity.js';

/**
 * API key rows. Creating and revoking a key each write their audit row (`api_key.created`,
 * `api_key.revoked`: id, name, scopes, never the secret or its hash) in the same transaction.
 */
@Injectable()
export class ApiKeysRepository {
  constructor(
    @InjectRepository(ApiKey) private readonly repo: Repository<ApiKey>,
    private readonly audit: AuditTrail,
  ) {}

  async insert(row: Pick<ApiKey, 'id' | 'name' | 'secretSha256' | 'scopes'>): Promise<ApiKey> {
    const created: ApiKey = { ...row, createdAt: new Date(), revokedAt: null };
    await this.repo.manager.transaction(async (m) => {
      await m.insert(ApiKey, created);
      await this.audit.record(m, {
        kind: 'api_key.created',
        detail: { keyId: row.id, name: row.name, scopes: row.scopes, keyPrincipal: `apikey:${row.id}` },
      });
    });
    return created;
  }

  async findById(id: string): Promise<ApiKey | null> {
    return this.repo.findOneBy({ id });
  }

  async listAll(): Promise<ApiKey[]> {
    return this.repo.find({ order: { createdAt: 'ASC' } });
  }

  /** Marks a live key revoked; false when no such key exists or it was already revoked (nothing recorded). */
  async revokeIfLive(id: string): Promise<boolean> {
    return this.repo.manager.transaction(async (m) => {
      const [rows] = await m.query<[{ name: string; scopes: string[] }[], number]>(
        `UPDATE "api_key" SET "revoked_at" = $2 WHERE "id" = $1 AND "revoked_at" IS NULL
         RETURNING "name", "scopes"`,
        [id, new Date()],
      );
      if (rows.length === 0) return false;
      await this.audit.record(m, {
        kind: 'api_key.revoked',
        detail: { keyId: id, name: rows[0].name, scopes: rows[0].scopes, keyPrincipal: `apikey:${id}` },
      });
      return true;
    });
  }
}
