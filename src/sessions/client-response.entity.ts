import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * A server-to-client request of a session, recorded when it is sent (`payload` NULL: outstanding), and the
 * client's JSON-RPC response to it once that arrives at an instance other than the one waiting; the waiting
 * instance is woken over the bus and takes the row. An answer to anything not recorded here is refused.
 */
@Entity({ name: 'mcp_client_response' })
export class ClientResponse {
  @PrimaryColumn({ type: 'text' })
  sessionId: string;

  @PrimaryColumn({ type: 'text' })
  requestId: string;

  @Column({ type: 'jsonb', nullable: true })
  payload: Record<string, unknown> | null;

  /** JSON bytes of `payload`, counted against QUOTA_CLIENT_RESPONSE_BYTES_PER_SESSION (0 while outstanding). */
  @Column({ type: 'integer', default: 0 })
  payloadBytes: number;

  /** When the request was sent; it is outstanding for CLIENT_REQUEST_TIMEOUT_MS from then. */
  @Column({ type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;
}
