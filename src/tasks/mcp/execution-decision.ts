import type { TaskSupport } from '../../tool-dispatch/tool-context.js';
import type { TaskEra } from '../task.types.js';

/**
 * How a tools/call runs, decided in one place for every transport. Inputs are what the tool declared
 * (`taskSupport`, absent = forbidden), what the client asked for on this request, and the era:
 *
 * legacy era (2025-11-25; https://modelcontextprotocol.io/specification/2025-11-25/basic/utilities/tasks#tool-level-negotiation):
 * the client asks with `params.task`.
 *   | taskSupport | params.task | decision                                   |
 *   | forbidden   | absent      | inline                                     |
 *   | forbidden   | present     | refuse: method_not_found (-32601, SHOULD)  |
 *   | optional    | absent      | inline                                     |
 *   | optional    | present     | task (the handle at once)                  |
 *   | required    | absent      | refuse: method_not_found (-32601, MUST)    |
 *   | required    | present     | task                                       |
 *
 * modern era (2026-07-28; §3.3, §3.10, §3.13): the server decides; the client only says, per request in
 * `_meta`, that it can take a task (`extensions["io.modelcontextprotocol/tasks"]`). A legacy `task` param
 * is ignored, and a client that declared only the legacy capability counts as not declaring.
 *   | taskSupport | extension declared | decision                                              |
 *   | forbidden   | either             | inline                                                |
 *   | optional    | no                 | inline (MUST NOT return a task)                       |
 *   | optional    | yes                | inline_then_task (inline for the window, then a task) |
 *   | required    | no                 | refuse: missing_capability (-32021, HTTP 400)         |
 *   | required    | yes                | task (CreateTaskResult, after any synchronous MRTR)   |
 *
 * In the legacy era a client's `capabilities.tasks` from initialize describes what *it* can host
 * (sampling/elicitation as tasks); it does not gate tool tasks, so it is not an input here.
 */

export interface LegacyCallSignals {
  era: 'legacy';
  taskSupport: TaskSupport | undefined;
  /** `params.task` is present on the tools/call. */
  taskRequested: boolean;
}

export interface ModernCallSignals {
  era: 'modern';
  taskSupport: TaskSupport | undefined;
  /** This request's `_meta` client capabilities contain extensions["io.modelcontextprotocol/tasks"]. */
  extensionDeclared: boolean;
}

export type CallSignals = LegacyCallSignals | ModernCallSignals;

export type RefusalKind =
  /** Legacy era: answer -32601 Method not found. */
  | 'method_not_found'
  /** Modern era: answer -32021 Missing required client capability (HTTP 400) with requiredCapabilities. */
  | 'missing_capability';

export type ExecutionDecision =
  | { mode: 'inline' }
  | { mode: 'task' }
  | { mode: 'inline_then_task'; windowMs: number }
  | { mode: 'refuse'; kind: RefusalKind; message: string };

export function decideExecution(
  call: CallSignals,
  toolName: string,
  options: { inlineWindowMs: number },
): ExecutionDecision {
  const support: TaskSupport = call.taskSupport ?? 'forbidden';
  const era: TaskEra = call.era;
  switch (era) {
    case 'legacy': {
      const asked = (call as LegacyCallSignals).taskRequested;
      switch (support) {
        case 'forbidden':
          return asked
            ? {
                mode: 'refuse',
                kind: 'method_not_found',
                message: `Tool ${toolName} does not support task augmentation (taskSupport: 'forbidden')`,
              }
            : { mode: 'inline' };
        case 'optional':
          return asked ? { mode: 'task' } : { mode: 'inline' };
        case 'required':
          return asked
            ? { mode: 'task' }
            : {
                mode: 'refuse',
                kind: 'method_not_found',
                message: `Tool ${toolName} requires task augmentation (taskSupport: 'required')`,
              };
      }
      break;
    }
    case 'modern': {
      const declared = (call as ModernCallSignals).extensionDeclared;
      switch (support) {
        case 'forbidden':
          return { mode: 'inline' };
        case 'optional':
          return declared
            ? { mode: 'inline_then_task', windowMs: options.inlineWindowMs }
            : { mode: 'inline' };
        case 'required':
          return declared
            ? { mode: 'task' }
            : { mode: 'refuse', kind: 'missing_capability', message: 'Missing required client capability' };
      }
      break;
    }
  }
  throw new Error(`unreachable execution decision for ${String(era)}/${String(support)}`);
}
