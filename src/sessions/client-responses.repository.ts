import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import type { Repository } from 'typeorm';
import { ClientResponse } from './client-response.entity.js';

@Injectable()
export class ClientResponsesRepository {
  constructor(@InjectRepository(ClientResponse) private readonly repo: Repository<ClientResponse>) {}

  async park(sessionId: string, requestId: string, payload: Record<string, unknown>): Promise<void> {
    await this.repo.query(
      `INSERT INTO mcp_client_response (session_id, request_id, payload) VALUES ($1, $2, $3)
       ON CONFLICT (session_id, request_id) DO UPDATE SET payload = EXCLUDED.payload, created_at = now()`,
      [sessionId, requestId, JSON.stringify(payload)],
    );
  }

  /** Removes and returns the parked response, so exactly one waiter consumes it. */
  async take(sessionId: string, requestId: string): Promise<Record<string, unknown> | undefined> {
    const rows = await this.repo.query<[{ payload: Record<string, unknown> }[], number]>(
      'DELETE FROM mcp_client_response WHERE session_id = $1 AND request_id = $2 RETURNING payload',
      [sessionId, requestId],
    );
    return rows[0]?.[0]?.payload;
  }

  async deleteOlderThan(cutoff: Date): Promise<void> {
    await this.repo.createQueryBuilder().delete().where('created_at < :cutoff', { cutoff }).execute();
  }
}
