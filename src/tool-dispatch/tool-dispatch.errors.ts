import { DomainError } from '../common/domain-error.js';

/** Why dispatch refused or failed. The protocol layer maps each code to a JSON-RPC error once, at the edge. */
export enum ToolDispatchErrorCode {
  /** `tools/call` named no registered tool. */
  TOOL_NOT_FOUND = 'TOOL_NOT_FOUND',
  /** `resources/read` (or a completion ref) named no resource or template; `data.uri` carries the URI. */
  RESOURCE_NOT_FOUND = 'RESOURCE_NOT_FOUND',
  /** `prompts/get` (or a completion ref) named no registered prompt. */
  PROMPT_NOT_FOUND = 'PROMPT_NOT_FOUND',
  /** Arguments failed validation; `data.problems` lists one message per bad field. */
  INVALID_ARGUMENTS = 'INVALID_ARGUMENTS',
  /** The caller lacks a scope the tool requires; `data.requiredScopes` lists them. */
  INSUFFICIENT_SCOPE = 'INSUFFICIENT_SCOPE',
  /** A handler returned something that breaks its own declared output schema (a server bug). */
  INVALID_RESULT = 'INVALID_RESULT',
  /** A decorator declaration is wrong (bad name, bad schema, duplicate); raised at startup only. */
  INVALID_DEFINITION = 'INVALID_DEFINITION',
}

/** The one error class of tool dispatch. `data` is safe to show to the client; it never holds a stack. */
export class ToolDispatchError extends DomainError<ToolDispatchErrorCode> {
  constructor(
    code: ToolDispatchErrorCode,
    message: string,
    readonly data?: Record<string, unknown>,
  ) {
    super(code, message);
  }
}

/** Longest client-chosen name an error repeats (a URI gets more: clients match data.uri). */
const ECHO_NAME_CHARS = 256;
export const ECHO_URI_CHARS = 2048;

/**
 * A client-chosen string as an error answer repeats it: cut to `max` characters, so that a name or URI as
 * large as the body limit does not come back twice (message and data) in the answer and once more in the log.
 */
export function echoed(text: string, max = ECHO_NAME_CHARS): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
