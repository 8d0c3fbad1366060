import { correlationId, internalErrorText, isInfrastructureFault } from '../common/internal-fault.js';
import { JsonRpcError } from '../common/json-rpc-error.js';
import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import type { Principal } from '../principals/principal.js';
import { capProblems, MAX_PROBLEMS } from './schema/input-validator.js';
import { completionKey, type ToolCatalog, type ToolDefinition } from './tool-catalog.js';
import { McpControlSignal, type JsonObject, type ToolContext } from './tool-context.js';
import { ECHO_URI_CHARS, echoed, ToolDispatchError, ToolDispatchErrorCode } from './tool-dispatch.errors.js';
import type {
  CallToolResult,
  CompleteResult,
  CompletionArgument,
  CompletionContext,
  CompletionRef,
  GetPromptResult,
  PromptDescriptor,
  PromptMessage,
  ReadResourceResult,
  ResourceContents,
  ResourceDescriptor,
  ResourceTemplateDescriptor,
  ToolDescriptor,
} from './tool-dispatch.types.js';
import { NO_AUDIT, type AuditPolicy } from './tool-dispatch.types.js';
import { ToolExplorer } from './tool-explorer.service.js';
import { isJsonObject } from '../common/json.js';
import { errorMessage } from '../common/error-message.js';

/**
 * A tool looked up once for one tools/call, with whether the caller may call it: the protocol layer resolves
 * it at the start of the call and hands it down, so that nothing below looks the tool up again.
 */
export interface ResolvedTool {
  /** The name the call asked for. */
  readonly name: string;
  /** Undefined when no tool has that name. */
  readonly descriptor: ToolDescriptor | undefined;
  /** Whether the resolving principal holds every scope the tool declares (false for an unknown tool). */
  readonly mayCall: boolean;
  /** The registry's own entry, for `callTool`. */
  readonly definition: ToolDefinition | undefined;
}

/** The most values one `completion/complete` answer may carry (MCP limit). */
export const MAX_COMPLETION_VALUES = 100;

/**
 * What the protocol layer calls to serve tools, resources, prompts and completions. Everything is discovered
 * and validated once at module init (a bad definition stops startup); afterwards the registry is read-only.
 * Lists are in a fixed order (tools in registration order, prompts by name, resources by URI, templates by URI template) so that clients see
 * a deterministic order. Wire envelopes (`resultType`, `execution`, cache hints, JSON-RPC codes) belong to the
 * protocol layer: this service speaks in descriptors, results and `ToolDispatchError`s.
 */
@Injectable()
export class ToolRegistry implements OnModuleInit {
  private readonly logger = new Logger(ToolRegistry.name);
  private catalog: ToolCatalog = {
    tools: new Map(),
    resources: new Map(),
    templates: new Map(),
    prompts: new Map(),
    completions: new Map(),
  };

  /**
   * The audit declarations of the tools that made one, apart from the catalog: the task audit writer asks for
   * a tool's policy on every creation and completion, and that must not be a second lookup of the tool a
   * call has already resolved (usually this map is empty).
   */
  private auditPolicies = new Map<string, AuditPolicy>();

  constructor(private readonly explorer: ToolExplorer) {}

  onModuleInit(): void {
    this.catalog = this.explorer.explore();
    const c = this.catalog;
    this.auditPolicies = new Map(
      [...c.tools.entries()].flatMap(([name, t]) =>
        t.descriptor.audit === NO_AUDIT ? [] : [[name, t.descriptor.audit] as const],
      ),
    );
    this.logger.log(
      `MCP registry: ${c.tools.size} tools, ${c.resources.size} resources, ${c.templates.size} resource templates, ` +
        `${c.prompts.size} prompts, ${c.completions.size} completions`,
    );
  }

  /** Counts, for deciding which server capabilities to advertise. */
  summary(): {
    tools: number;
    resources: number;
    resourceTemplates: number;
    prompts: number;
    completions: number;
  } {
    const c = this.catalog;
    return {
      tools: c.tools.size,
      resources: c.resources.size,
      resourceTemplates: c.templates.size,
      prompts: c.prompts.size,
      completions: c.completions.size,
    };
  }

  /**
   * Every tool in registration order (module provider order, then method order in the class): deterministic
   * across restarts and instances, and under the tool authors' control (clients show the first ones first).
   * With a principal, only the tools it may call (see `mayCall`).
   * Descriptors and schemas are frozen; raw JSON Schemas are exactly what the tool author wrote.
   */
  listTools(principal?: Principal): ToolDescriptor[] {
    return [...this.catalog.tools.values()]
      .filter((t) => !principal || this.mayCall(t.descriptor, principal))
      .map((t) => t.descriptor);
  }

  getTool(name: string): ToolDescriptor | undefined {
    return this.catalog.tools.get(name)?.descriptor;
  }

  /** The fields a tool opted into the audit trail (`@McpTool({ audit })`); NO_AUDIT for most tools. */
  auditPolicyOf(name: string): AuditPolicy {
    return this.auditPolicies.get(name) ?? NO_AUDIT;
  }

  /** Whether a tool has this name (a label guard; a call resolves its tool with `resolve`). */
  hasTool(name: string): boolean {
    return this.catalog.tools.has(name);
  }

  /** Looks a tool up for one call and decides the principal's access to it (see `mayCall`). */
  resolve(name: string, principal: Principal): ResolvedTool {
    const definition = this.catalog.tools.get(name);
    return {
      name,
      definition,
      descriptor: definition?.descriptor,
      mayCall: definition ? this.mayCall(definition.descriptor, principal) : false,
    };
  }

  /**
   * Whether `principal` holds every scope the tool declares. The anonymous development principal (no auth
   * provider configured) is not scope-checked: with auth off there is nothing to check scopes against.
   */
  mayCall(tool: ToolDescriptor, principal: Principal): boolean {
    if (principal.provider === 'anonymous') return true;
    return tool.scopes.every((s) => principal.scopes.includes(s));
  }

  /**
   * Validates the arguments, runs the handler and normalises what it returns.
   *
   * Refusals (thrown as `ToolDispatchError`): `TOOL_NOT_FOUND` (data.name), `INSUFFICIENT_SCOPE`
   * (data.requiredScopes), `INVALID_ARGUMENTS` (data.problems: one message per bad field, e.g.
   * `arguments.count must be an integer number`; unknown properties are refused, never silently dropped).
   * A DTO input reaches the handler as an instance of the DTO class, defaults applied; a raw JSON Schema input
   * reaches it as sent (missing arguments count as `{}`).
   *
   * Handler errors: a plain `Error` (or any other thrown value) becomes
   * `{ content: [{ type: 'text', text: err.message }], isError: true }`, never with a stack; an infrastructure
   * error (PostgreSQL, driver, TypeORM, socket) becomes `Internal error (correlation id …)` instead, its text
   * logged only. These propagate
   * unchanged instead: `McpProtocolError` and the server's own wire errors (any `JsonRpcError`: it becomes a JSON-RPC error), `McpControlSignal` subclasses (server
   * control flow such as "input required"), and anything thrown once `ctx.signal` has aborted (the call was
   * cancelled; there is nobody to report a tool error to).
   *
   * Return values:
   * - a string → one text content item;
   * - an object with a `content` array → used as the CallToolResult as is (with an output schema and no
   *   `isError`, its `structuredContent` is validated);
   * - with an output schema, any other object → validated, sent as `structuredContent` plus a JSON text copy;
   * - without one, any other value → its JSON text; `undefined`/`null` → empty content.
   * A result breaking the declared output schema throws `INVALID_RESULT` (a server bug, reported as such).
   * `target` is a tool name, or a tool resolved for this call already (`resolve`; no second lookup).
   * `opts.rethrow` (task runs of a tool with a retry policy): a handler error it returns a value for is thrown
   * as that value instead of becoming an `isError` result, so the run can be tried again.
   */
  async callTool(
    target: string | ResolvedTool,
    rawArgs: unknown,
    ctx: ToolContext,
    opts: { rethrow?: (err: unknown) => Error | undefined } = {},
  ): Promise<CallToolResult> {
    const resolved = typeof target === 'string' ? this.resolve(target, ctx.principal) : target;
    const name = resolved.name;
    const tool = resolved.definition;
    if (!tool) {
      const shown = echoed(name);
      throw new ToolDispatchError(ToolDispatchErrorCode.TOOL_NOT_FOUND, `Tool not found: ${shown}`, {
        name: shown,
      });
    }
    if (!resolved.mayCall) {
      throw new ToolDispatchError(
        ToolDispatchErrorCode.INSUFFICIENT_SCOPE,
        `Tool ${name} requires more scopes`,
        {
          name,
          requiredScopes: [...tool.descriptor.scopes],
        },
      );
    }
    const checked = await tool.input.validate(rawArgs, 'arguments');
    if (!checked.ok) throw invalidArguments(`tool ${name}`, checked.problems, { name });

    let returned: unknown;
    try {
      returned = await tool.handler(checked.value, ctx);
    } catch (err) {
      if (err instanceof JsonRpcError || err instanceof McpControlSignal || ctx.signal.aborted) throw err;
      const replacement = opts.rethrow?.(err);
      if (replacement !== undefined) throw replacement;
      if (isInfrastructureFault(err)) {
        // Database and driver text names tables, hosts and roles: the caller gets an id to quote, the log the rest.
        const id = correlationId();
        this.logger.error(
          `Tool ${name} (${tool.source}) failed on infrastructure [${id}]: ${(err as Error).message}`,
          (err as Error).stack,
        );
        return { content: [{ type: 'text', text: internalErrorText(id) }], isError: true };
      }
      const message = errorMessage(err);
      this.logger.warn(`Tool ${name} (${tool.source}) reported an error: ${message}`);
      return { content: [{ type: 'text', text: message || `Tool ${name} failed` }], isError: true };
    }
    return this.normaliseToolResult(tool, returned);
  }

  listResources(): ResourceDescriptor[] {
    return [...this.catalog.resources.values()]
      .map((r) => r.descriptor)
      .sort((a, b) => compare(a.uri, b.uri));
  }

  listResourceTemplates(): ResourceTemplateDescriptor[] {
    return [...this.catalog.templates.values()]
      .map((t) => t.descriptor)
      .sort((a, b) => compare(a.uriTemplate, b.uriTemplate));
  }

  /**
   * Reads a fixed resource, else the first matching template (the one with the most literal text wins, then
   * the alphabetically first). Unknown URI → `RESOURCE_NOT_FOUND` with `data.uri`; a handler may throw the same
   * error for a template variable naming nothing. Handler errors propagate (resources have no error result).
   *
   * Return values: a string → one text item (`mimeType` from the decorator, else text/plain); bytes → one blob
   * item (base64; else application/octet-stream); one contents object or an array of them (missing `uri` and
   * `mimeType` filled in); or a complete `{ contents }` result.
   */
  async readResource(uri: string, ctx: ToolContext): Promise<ReadResourceResult> {
    const fixed = this.catalog.resources.get(uri);
    let mimeType: string | undefined;
    let returned: unknown;
    if (fixed) {
      mimeType = fixed.descriptor.mimeType;
      returned = await fixed.handler({ uri, params: {} }, ctx);
    } else {
      const match = [...this.catalog.templates.values()]
        .sort(
          (a, b) =>
            b.template.literalLength - a.template.literalLength ||
            compare(a.template.template, b.template.template),
        )
        .map((t) => ({ t, params: t.template.match(uri) }))
        .find((m) => m.params !== undefined);
      if (!match?.params) {
        const shown = echoed(uri, ECHO_URI_CHARS);
        throw new ToolDispatchError(
          ToolDispatchErrorCode.RESOURCE_NOT_FOUND,
          `Resource not found: ${shown}`,
          {
            uri: shown,
          },
        );
      }
      mimeType = match.t.descriptor.mimeType;
      returned = await match.t.handler({ uri, params: match.params }, ctx);
    }
    return normaliseResource(uri, mimeType, returned);
  }

  listPrompts(): PromptDescriptor[] {
    return [...this.catalog.prompts.values()]
      .map((p) => p.descriptor)
      .sort((a, b) => compare(a.name, b.name));
  }

  /**
   * Validates the arguments and renders the prompt. Unknown prompt → `PROMPT_NOT_FOUND` (data.name); missing
   * required, unknown or non-string arguments → `INVALID_ARGUMENTS` naming each one. A DTO prompt gets a DTO
   * instance, a list prompt a plain `Record<string, string>`. Handler errors propagate.
   *
   * Return values: a string → one user text message; an array of messages; or a complete `{ messages }` result
   * (its `description` defaults to the prompt's).
   */
  async getPrompt(
    name: string,
    args: Record<string, unknown> | undefined,
    ctx: ToolContext,
  ): Promise<GetPromptResult> {
    const prompt = this.catalog.prompts.get(name);
    if (!prompt) {
      const shown = echoed(name);
      throw new ToolDispatchError(ToolDispatchErrorCode.PROMPT_NOT_FOUND, `Prompt not found: ${shown}`, {
        name: shown,
      });
    }
    let value: unknown;
    if (prompt.dto) {
      const checked = await prompt.dto.validate(args, 'arguments');
      if (!checked.ok) throw invalidArguments(`prompt ${name}`, checked.problems, { name });
      value = checked.value;
    } else {
      const problems = checkPromptArguments(prompt.descriptor, args);
      if (problems.length > 0) throw invalidArguments(`prompt ${name}`, problems, { name });
      value = { ...(args ?? {}) };
    }
    const returned = await prompt.handler(value, ctx);
    return normalisePrompt(prompt.descriptor, returned);
  }

  /**
   * Completion values for one argument of a prompt or resource template. Unknown prompt → `PROMPT_NOT_FOUND`,
   * unknown template → `RESOURCE_NOT_FOUND`; a known one without an `@McpCompletion` answers no values. At most
   * 100 values are returned; when the handler gave more, `hasMore` is set and `total` counts them all.
   */
  async complete(
    ref: CompletionRef,
    argument: CompletionArgument,
    context?: CompletionContext,
  ): Promise<CompleteResult> {
    if (ref.type === 'ref/prompt' && !this.catalog.prompts.has(ref.name)) {
      const shown = echoed(ref.name);
      throw new ToolDispatchError(ToolDispatchErrorCode.PROMPT_NOT_FOUND, `Prompt not found: ${shown}`, {
        name: shown,
      });
    }
    if (
      ref.type === 'ref/resource' &&
      !this.catalog.templates.has(ref.uri) &&
      !this.catalog.resources.has(ref.uri)
    ) {
      const shown = echoed(ref.uri, ECHO_URI_CHARS);
      throw new ToolDispatchError(ToolDispatchErrorCode.RESOURCE_NOT_FOUND, `Resource not found: ${shown}`, {
        uri: shown,
      });
    }
    const completion = this.catalog.completions.get(completionKey(ref));
    if (!completion) return { values: [] };
    const returned = (await completion.handler(argument, context ?? {})) as string[] | CompleteResult;
    const given: CompleteResult = Array.isArray(returned) ? { values: returned } : returned;
    const values = (given.values ?? []).filter((v): v is string => typeof v === 'string');
    const cut = values.length > MAX_COMPLETION_VALUES;
    const result: CompleteResult = { values: values.slice(0, MAX_COMPLETION_VALUES) };
    const total = given.total ?? (cut ? values.length : undefined);
    if (total !== undefined) result.total = total;
    const hasMore = given.hasMore ?? (cut ? true : undefined);
    if (hasMore !== undefined) result.hasMore = hasMore;
    return result;
  }

  private async normaliseToolResult(tool: ToolDefinition, returned: unknown): Promise<CallToolResult> {
    const name = tool.descriptor.name;
    if (returned === undefined || returned === null) {
      if (tool.output)
        throw invalidResult(name, ['the handler returned nothing but the tool declares an output schema']);
      return { content: [] };
    }
    if (typeof returned === 'string') {
      if (tool.output)
        throw invalidResult(name, ['the handler returned a string but the tool declares an output schema']);
      return { content: [{ type: 'text', text: returned }] };
    }
    if (isJsonObject(returned) && Array.isArray(returned.content)) {
      const result = { ...returned } as unknown as CallToolResult;
      if (tool.output && result.isError !== true) {
        if (result.structuredContent === undefined) {
          throw invalidResult(name, ['structuredContent is missing but the tool declares an output schema']);
        }
        await this.checkOutput(tool, result.structuredContent);
      }
      return result;
    }
    if (tool.output) {
      const structured = await this.checkOutput(tool, returned);
      return { content: [{ type: 'text', text: JSON.stringify(structured) }], structuredContent: structured };
    }
    return { content: [{ type: 'text', text: JSON.stringify(returned) }] };
  }

  /** Validates against the output schema; returns a plain JSON copy (a DTO output is validated, not sent). */
  private async checkOutput(tool: ToolDefinition, value: unknown): Promise<JsonObject> {
    const plain = JSON.parse(JSON.stringify(value)) as unknown;
    if (!isJsonObject(plain))
      throw invalidResult(tool.descriptor.name, ['structuredContent must be a JSON object']);
    const checked = await tool.output!.validate(plain, 'structuredContent');
    if (!checked.ok) throw invalidResult(tool.descriptor.name, checked.problems);
    return plain;
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function invalidArguments(
  what: string,
  problems: string[],
  data: Record<string, unknown>,
): ToolDispatchError {
  return new ToolDispatchError(
    ToolDispatchErrorCode.INVALID_ARGUMENTS,
    `Invalid arguments for ${what}: ${problems.join('; ')}`,
    { ...data, problems },
  );
}

function invalidResult(name: string, problems: string[]): ToolDispatchError {
  return new ToolDispatchError(
    ToolDispatchErrorCode.INVALID_RESULT,
    `Tool ${name} returned a result that breaks its output schema: ${problems.join('; ')}`,
    { name, problems },
  );
}

function checkPromptArguments(prompt: PromptDescriptor, args: Record<string, unknown> | undefined): string[] {
  if (args !== undefined && args !== null && (typeof args !== 'object' || Array.isArray(args))) {
    return ['arguments must be an object'];
  }
  const given = args ?? {};
  const declared = prompt.arguments ?? [];
  const problems: string[] = [];
  for (const arg of declared) {
    const value = given[arg.name];
    if (value === undefined || value === null) {
      if (arg.required) problems.push(`arguments.${arg.name} is required`);
    } else if (typeof value !== 'string') {
      problems.push(`arguments.${arg.name} must be a string`);
    }
  }
  const names = new Set(declared.map((a) => a.name));
  let unknown = 0;
  for (const key of Object.keys(given)) {
    if (names.has(key)) continue;
    unknown++;
    if (unknown <= MAX_PROBLEMS) problems.push(`arguments.${key} is not allowed (unknown argument)`);
  }
  return capProblems(problems, problems.length + Math.max(0, unknown - MAX_PROBLEMS));
}

function normaliseResource(uri: string, mimeType: string | undefined, returned: unknown): ReadResourceResult {
  const fill = (item: JsonObject): ResourceContents =>
    ({ uri, ...(mimeType !== undefined ? { mimeType } : {}), ...item }) as unknown as ResourceContents;
  if (typeof returned === 'string')
    return { contents: [fill({ mimeType: mimeType ?? 'text/plain', text: returned })] };
  if (returned instanceof Uint8Array) {
    const blob = Buffer.from(returned).toString('base64');
    return { contents: [fill({ mimeType: mimeType ?? 'application/octet-stream', blob })] };
  }
  if (Array.isArray(returned)) return { contents: returned.map((item) => fill(item as JsonObject)) };
  if (isJsonObject(returned) && Array.isArray(returned.contents))
    return returned as unknown as ReadResourceResult;
  if (isJsonObject(returned) && (typeof returned.text === 'string' || typeof returned.blob === 'string')) {
    return { contents: [fill(returned)] };
  }
  throw new Error(`Resource handler for ${uri} returned an unsupported value`);
}

function normalisePrompt(prompt: PromptDescriptor, returned: unknown): GetPromptResult {
  if (typeof returned === 'string') {
    return {
      description: prompt.description,
      messages: [{ role: 'user', content: { type: 'text', text: returned } }],
    };
  }
  if (Array.isArray(returned))
    return { description: prompt.description, messages: returned as PromptMessage[] };
  if (isJsonObject(returned) && Array.isArray(returned.messages)) {
    return { description: prompt.description, ...(returned as unknown as GetPromptResult) };
  }
  throw new Error(`Prompt handler for ${prompt.name} returned an unsupported value`);
}
