import type { ConsoleSessionRow } from './sessions-admin.repository.js';
import { McpSession } from './session.entity.js';

/*
 * The mapping of mcp_session rows to what the repositories answer: the one place that knows the table's
 * column names on the way out.
 */

/** An mcp_session row as the session repository reads it. */
export interface SessionRow {
  id: string;
  principal_id: string;
  protocol_version: string;
  client_capabilities: Record<string, unknown>;
  client_info: Record<string, unknown> | null;
  log_level: string | null;
  resource_subscriptions: string[];
  created_at: Date;
  last_seen_at: Date;
  ended_at: Date | null;
}

export function rowToSession(row: SessionRow): McpSession {
  return Object.assign(new McpSession(), {
    id: row.id,
    principalId: row.principal_id,
    protocolVersion: row.protocol_version,
    clientCapabilities: row.client_capabilities,
    clientInfo: row.client_info,
    logLevel: row.log_level,
    resourceSubscriptions: row.resource_subscriptions,
    createdAt: row.created_at,
    lastSeenAt: row.last_seen_at,
    endedAt: row.ended_at,
  });
}

/** A line of the console's session list, from its projection (client name, retained event streams). */
export function rowToConsoleSession(r: Record<string, unknown>): ConsoleSessionRow {
  return {
    id: r.id as string,
    principalId: r.principal_id as string,
    protocolVersion: r.protocol_version as string,
    clientName: (r.client_name as string | null) ?? null,
    createdAt: r.created_at as Date,
    lastSeenAt: r.last_seen_at as Date,
    eventStreams: Number(r.event_streams),
  };
}
