import { isJsonObject } from '../../common/json.js';
import { ProtocolError } from '../../protocol/protocol.errors.js';
import { TASKS_EXTENSION } from '../../protocol/versions.js';

export type Params = Record<string, unknown>;

export function taskIdOf(p: Params): string {
  if (typeof p.taskId !== 'string' || p.taskId.length === 0) {
    throw ProtocolError.invalidParams('params.taskId must be a non-empty string');
  }
  return p.taskId;
}

/** The capability a modern (2026-07-28) client must declare to use tasks. */
export const REQUIRED_EXTENSION = { extensions: { [TASKS_EXTENSION]: {} } };

/** Whether the modern client declared the tasks extension in its capabilities. */
export function extensionDeclared(clientCapabilities: Params): boolean {
  const ext = clientCapabilities.extensions;
  return isJsonObject(ext) && TASKS_EXTENSION in ext;
}

export function requireExtension(clientCapabilities: Params): void {
  if (!extensionDeclared(clientCapabilities)) throw ProtocolError.missingCapability(REQUIRED_EXTENSION);
}
