import type { Principal } from '../principals/principal.js';
import { ToolDispatchError, ToolDispatchErrorCode } from '../tool-dispatch/tool-dispatch.errors.js';
import type { ResolvedTool, ToolRegistry } from '../tool-dispatch/tool-registry.service.js';

/**
 * The one lookup of a tools/call: resolves the tool named in `params.name` and the caller's access to it.
 * Called by each era handler before anything else of the request runs, so a scope refusal happens before any
 * stream opens and can carry a 403 with a step-up challenge (McpController.fail). An unknown tool is not
 * refused here: it is answered where it always was (TOOL_NOT_FOUND from the registry's callTool).
 */
export function resolveToolCall(
  registry: ToolRegistry,
  params: Record<string, unknown> | undefined,
  principal: Principal,
): ResolvedTool | undefined {
  const name = params?.name;
  if (typeof name !== 'string') return undefined;
  const resolved = registry.resolve(name, principal);
  if (resolved.descriptor && !resolved.mayCall) {
    throw new ToolDispatchError(ToolDispatchErrorCode.INSUFFICIENT_SCOPE, `tool ${name} needs more scopes`, {
      name,
      requiredScopes: [...resolved.descriptor.scopes],
    });
  }
  return resolved;
}
