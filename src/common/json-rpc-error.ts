/**
 * An error that already is a JSON-RPC error answer (`code`, `message`, `data`): the tool-author API's
 * `McpProtocolError` and the protocol layer's own `ProtocolError` extend it. Raised inside a tool handler,
 * it ends the call (or the task) with that error instead of a tool error result, so dispatch lets it through.
 * It lives here, below both, so that neither depends on the other for it.
 */
export class JsonRpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = new.target.name;
  }
}
