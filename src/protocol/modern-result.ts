import { isJsonObject } from '../common/json.js';
import { SERVER_INFO } from './mcp-methods.service.js';
import { META } from './versions.js';

/**
 * A finished result as the modern era (2026-07-28) answers it: `resultType: "complete"` and the server's identity in
 * `_meta`. The one rendering of a tool result for that era: the inline answer to a call, the `result` that
 * `tasks/get` inlines for a completed task and the one `notifications/tasks` carries, because the extension inlines
 * "exactly what the underlying request would have returned". The legacy era (2025-11-25) has no `resultType`.
 */
export function modernCompleteResult(result: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { resultType: 'complete', ...result };
  const meta = isJsonObject(out._meta) ? out._meta : {};
  out._meta = { ...meta, [META.SERVER_INFO]: SERVER_INFO };
  return out;
}
