import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * A client's JSON-RPC response to a server-to-client request, parked here when the handler waiting for it
 * runs on another instance; that instance is woken over the bus and takes the row.
 */
@Entity({ name: 'mcp_client_response' })
export class ClientResponse {
  @PrimaryColumn({ type: 'text' })
  sessionId: string;

  @PrimaryColumn({ type: 'text' })
  requestId: string;

  @Column({ type: 'jsonb' })
  payload: Record<string, unknown>;

  @Column({ type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;
}
