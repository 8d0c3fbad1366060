import { Injectable } from '@nestjs/common';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { ApiKey } from './api-key.entity.js';
import { ApiKeysRepository } from './api-keys.repository.js';
import { AuthFailure, AuthFailureReason } from './principals.errors.js';

/** `mcpk_<12 base32 chars: public id>_<43 base64url chars: 256-bit secret>` */
const KEY_SHAPE = /^mcpk_([a-z2-7]{12})_([A-Za-z0-9_-]{43})$/;
const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
const SCOPE = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

export interface CreatedApiKey {
  id: string;
  name: string;
  scopes: string[];
  /** The only time the full key exists outside the caller's hands. */
  key: string;
}

function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

function publicId(): string {
  return [...randomBytes(12)].map((b) => BASE32[b % 32]).join('');
}

/** Whether a presented credential has the shape of one of our API keys (and so belongs to this strategy). */
export function looksLikeApiKey(value: string): boolean {
  return value.startsWith('mcpk_');
}

export class ApiKeyInputError extends Error {}

/**
 * Creates, lists, revokes and checks service-account keys. Used by the API key strategy and by the CLI
 * (which builds it outside Nest over the same repository).
 */
@Injectable()
export class ApiKeysService {
  constructor(private readonly repo: ApiKeysRepository) {}

  async create(name: string, scopes: readonly string[]): Promise<CreatedApiKey> {
    const trimmed = name.trim();
    if (trimmed === '' || trimmed.length > 200)
      throw new ApiKeyInputError('name must be 1 to 200 characters');
    const bad = scopes.find((s) => !SCOPE.test(s));
    if (bad !== undefined)
      throw new ApiKeyInputError(`not a valid OAuth scope token: ${JSON.stringify(bad)}`);
    const id = publicId();
    const key = `mcpk_${id}_${randomBytes(32).toString('base64url')}`;
    const unique = [...new Set(scopes)];
    await this.repo.insert({ id, name: trimmed, secretSha256: sha256Hex(key), scopes: unique });
    return { id, name: trimmed, scopes: unique, key };
  }

  async list(): Promise<ApiKey[]> {
    return this.repo.listAll();
  }

  async revoke(id: string): Promise<boolean> {
    return this.repo.revokeIfLive(id);
  }

  /** The live key row for a presented key; throws AuthFailure for malformed, unknown, wrong or revoked keys. */
  async verify(presented: string): Promise<ApiKey> {
    const m = KEY_SHAPE.exec(presented);
    if (!m) throw new AuthFailure(AuthFailureReason.Malformed);
    const row = await this.repo.findById(m[1]);
    const expected = Buffer.from(row?.secretSha256 ?? sha256Hex(''), 'hex');
    const matches = timingSafeEqual(expected, Buffer.from(sha256Hex(presented), 'hex'));
    if (!row || !matches) throw new AuthFailure(AuthFailureReason.UnknownKey);
    if (row.revokedAt !== null) throw new AuthFailure(AuthFailureReason.RevokedKey);
    return row;
  }
}
