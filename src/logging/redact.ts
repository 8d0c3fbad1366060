/**
 * Secrets that must never reach a log line, whatever a caller (or a library's error message) put in it:
 * credentials in Authorization values, in URLs (user:password@, token-like query parameters), this server's
 * API keys, and JSON-ish `"password": "…"` pairs. Applied to the message and the stack of every line, and
 * pino's `redact` covers the same names as object keys.
 */
const RULES: [RegExp, string][] = [
  [/\b(Bearer|Basic|Digest|ApiKey)\s+[A-Za-z0-9._~+/=-]{4,}/gi, '$1 [REDACTED]'],
  [/(\b[a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:)[^\s@/]+@/gi, '$1[REDACTED]@'],
  [
    /([?&;](?:access_token|id_token|refresh_token|token|api[_-]?key|apikey|key|secret|client_secret|password|passwd|pwd|sig|signature)=)[^&\s#"']+/gi,
    '$1[REDACTED]',
  ],
  [/\bmcpk_[A-Za-z0-9]+_[A-Za-z0-9_-]+/g, 'mcpk_[REDACTED]'],
  [
    /((?<![A-Za-z0-9_])["']?(?:password|passwd|secret|client_secret|token|access_token|api[_-]?key|authorization|cookie)["']?\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,;}]+)/gi,
    '$1[REDACTED]',
  ],
];

export function redactSecrets(text: string): string {
  let out = text;
  for (const [pattern, replacement] of RULES) out = out.replace(pattern, replacement);
  return out;
}

/** Object keys whose values pino replaces (for objects handed to the logger as the message). */
export const REDACTED_KEYS = [
  'authorization',
  'Authorization',
  'cookie',
  'password',
  'secret',
  'token',
  'accessToken',
  'access_token',
  'apiKey',
  'api_key',
  'clientSecret',
  'client_secret',
  'headers.authorization',
  'headers.cookie',
  'headers["x-api-key"]',
  'headers["x-auth-proxy-secret"]',
];
