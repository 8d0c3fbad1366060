/**
 * The standard JSON-RPC 2.0 and MCP error codes. Kept below every feature (protocol/json-rpc.ts re-exports them)
 * so that a feature's error mapper can name the code its errors answer with without depending on protocol/.
 */
export const JSONRPC = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  /** Implementation-defined server error (legacy range), used for transport-level refusals. */
  SERVER_ERROR: -32000,
  /** MCP 2025 era: unknown session (SDK convention). */
  SESSION_NOT_FOUND: -32001,
  /** MCP 2025-11-25: unknown resource (2026-07-28 answers -32602 instead). */
  RESOURCE_NOT_FOUND_LEGACY: -32002,
  /** MCP 2025-06-18+: URL elicitation required. */
  URL_ELICITATION_REQUIRED: -32042,
  /** MCP 2026-07-28. */
  HEADER_MISMATCH: -32020,
  MISSING_REQUIRED_CLIENT_CAPABILITY: -32021,
  UNSUPPORTED_PROTOCOL_VERSION: -32022,
} as const;
