/** Protocol revisions this server speaks. */
export const LEGACY_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'] as const;
export const MODERN_VERSIONS = ['2026-07-28'] as const;
export const LATEST_LEGACY_VERSION = '2025-11-25';
export const ALL_VERSIONS: readonly string[] = [...MODERN_VERSIONS, ...LEGACY_VERSIONS];

export function isLegacyVersion(v: string): boolean {
  return (LEGACY_VERSIONS as readonly string[]).includes(v);
}

export function isModernVersion(v: string): boolean {
  return (MODERN_VERSIONS as readonly string[]).includes(v);
}

/** initialize: echo the client's version when we speak it, otherwise offer our latest legacy one. */
export function negotiateLegacyVersion(requested: unknown): string {
  return typeof requested === 'string' && isLegacyVersion(requested) ? requested : LATEST_LEGACY_VERSION;
}

export const META = {
  PROTOCOL_VERSION: 'io.modelcontextprotocol/protocolVersion',
  CLIENT_CAPABILITIES: 'io.modelcontextprotocol/clientCapabilities',
  CLIENT_INFO: 'io.modelcontextprotocol/clientInfo',
  LOG_LEVEL: 'io.modelcontextprotocol/logLevel',
  SERVER_INFO: 'io.modelcontextprotocol/serverInfo',
  SUBSCRIPTION_ID: 'io.modelcontextprotocol/subscriptionId',
  RELATED_TASK: 'io.modelcontextprotocol/related-task',
} as const;

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
