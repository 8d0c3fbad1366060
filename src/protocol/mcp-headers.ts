import { ProtocolError } from './protocol.errors.js';

/**
 * Decodes an `Mcp-*` header value: surrounding whitespace is ignored; `=?base64?…?=` carries UTF-8 that a
 * plain header cannot. A malformed encoded value is a header mismatch.
 */
export function decodeHeaderValue(raw: string, header: string): string {
  const v = raw.trim();
  const m = /^=\?base64\?(.*)\?=$/.exec(v);
  if (!m) return v;
  const b64 = m[1];
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 !== 0) {
    throw ProtocolError.headerMismatch(`${header} has an invalid base64 value`);
  }
  return Buffer.from(b64, 'base64').toString('utf8');
}

/** Which body field the Mcp-Name header mirrors, per method (2026-07-28 core plus the tasks extension). */
export function nameFieldFor(method: string): string | undefined {
  switch (method) {
    case 'tools/call':
    case 'prompts/get':
      return 'name';
    case 'resources/read':
      return 'uri';
    case 'tasks/get':
    case 'tasks/update':
    case 'tasks/cancel':
      return 'taskId';
    default:
      return undefined;
  }
}
