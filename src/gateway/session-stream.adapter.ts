import { Injectable } from '@nestjs/common';
import type { SqlTx } from '../database/sql-transaction.js';
import { SessionStream } from '../protocol/session-stream.port.js';
import { ClientRequestsService } from './client-requests.service.js';
import { STANDALONE_STREAM, StreamHub } from './stream-hub.service.js';

/** The tasks protocol's SessionStream port on this transport: a session's standalone (GET) stream. */
@Injectable()
export class SessionStreamAdapter extends SessionStream {
  constructor(
    private readonly hub: StreamHub,
    private readonly clientRequests: ClientRequestsService,
  ) {
    super();
  }

  async publish(sessionId: string, message: Record<string, unknown>): Promise<void> {
    await this.hub.publish(sessionId, STANDALONE_STREAM, message);
  }

  publishInTransaction(tx: SqlTx, sessionId: string, message: Record<string, unknown>): void {
    this.hub.publishInTransaction(tx, sessionId, STANDALONE_STREAM, message);
  }

  wakeHolder(sessionId: string): void {
    this.hub.wakeHolder(sessionId, STANDALONE_STREAM);
  }

  request(
    sessionId: string,
    method: string,
    params: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<Record<string, unknown>> {
    return this.clientRequests.request(sessionId, STANDALONE_STREAM, method, params, signal);
  }
}
