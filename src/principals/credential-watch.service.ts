import { Injectable, Logger } from '@nestjs/common';
import { ApiKeysRepository } from './api-keys.repository.js';
import type { Principal } from './principal.js';
import { errorMessage } from '../common/error-message.js';
import { GatewayConfig } from '../gateway/gateway.config.js';

const MAX_REMEMBERED_KEYS = 10_000;

/**
 * Whether the credential a long-lived stream was opened with still holds. Streams ask at every keep-alive:
 * a token's expiry is known from the token itself (no I/O); an API key's revocation is read from the
 * database at most once per key per keep-alive period, however many streams the key holds open.
 */
@Injectable()
export class CredentialWatch {
  private readonly logger = new Logger(CredentialWatch.name);
  /** key id -> the last answer from the database and when it was read. */
  private readonly keys = new Map<string, { atMs: number; live: Promise<boolean> }>();

  constructor(
    private readonly apiKeys: ApiKeysRepository,
    private readonly config: GatewayConfig,
  ) {}

  async stillValid(principal: Principal): Promise<boolean> {
    if (principal.expiresAt !== undefined && Date.now() >= principal.expiresAt) return false;
    if (principal.provider !== 'apikey') return true;
    return this.keyLive(principal.subject);
  }

  private keyLive(id: string): Promise<boolean> {
    const now = Date.now();
    const known = this.keys.get(id);
    // Half the keep-alive period: each stream's next tick sees a reading taken after its previous tick.
    if (known && now - known.atMs < this.config.SSE_KEEPALIVE_MS / 2) return known.live;
    const live = this.apiKeys.findById(id).then(
      (row) => row !== null && row.revokedAt === null,
      (err: unknown) => {
        // A database blip must not cut every stream: the next tick asks again.
        this.keys.delete(id);
        this.logger.warn(`API key check failed: ${errorMessage(err)}`);
        return true;
      },
    );
    if (this.keys.size >= MAX_REMEMBERED_KEYS) this.keys.clear();
    this.keys.set(id, { atMs: now, live });
    return live;
  }
}
