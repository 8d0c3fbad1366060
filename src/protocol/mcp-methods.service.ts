import { Injectable, type OnModuleInit } from '@nestjs/common';
import { BUILD_VERSION } from '../common/build-info.js';
import type { LoggingLevel, ToolContext } from '../tool-dispatch/tool-context.js';
import { ToolRegistry } from '../tool-dispatch/tool-registry.service.js';
import { QuotaService } from '../quotas/quota.service.js';
import type {
  CompletionContext,
  CompletionRef,
  ToolDescriptor,
} from '../tool-dispatch/tool-dispatch.types.js';
import { MethodRegistry, type MethodHandler } from './method-registry.js';
import { ProtocolError } from './protocol.errors.js';
import { LOG_LEVEL_ORDER, type McpRequestContext } from './request-context.js';
import { MODERN_VERSIONS, TASKS_EXTENSION } from './versions.js';

export const SERVER_INFO = { name: 'mcp-task-server', title: 'MCP Task Server', version: BUILD_VERSION };

type Params = Record<string, unknown>;

/**
 * Methods served the same way in both eras. `tools/call` is served by the tasks protocol (it decides whether
 * a call runs inline or as a task) on top of `callTool` below.
 */
type SharedMethod =
  | 'tools/list'
  | 'resources/list'
  | 'resources/templates/list'
  | 'resources/read'
  | 'prompts/list'
  | 'prompts/get'
  | 'completion/complete';

/** Results whose lists may be cached by the client in the 2026-07-28 era. */
export const CACHEABLE_METHODS = new Set([
  'tools/list',
  'prompts/list',
  'resources/list',
  'resources/templates/list',
  'resources/read',
]);

function str(params: Params, name: string): string {
  const v = params[name];
  if (typeof v !== 'string' || v.length === 0)
    throw ProtocolError.invalidParams(`params.${name} must be a non-empty string`);
  return v;
}

function obj(params: Params, name: string, required = false): Params | undefined {
  const v = params[name];
  if (v === undefined && !required) return undefined;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw ProtocolError.invalidParams(`params.${name} must be an object`);
  }
  return v as Params;
}

function completionRef(ref: Params): CompletionRef {
  if (ref.type === 'ref/prompt' && typeof ref.name === 'string')
    return { type: 'ref/prompt', name: ref.name };
  if (ref.type === 'ref/resource' && typeof ref.uri === 'string')
    return { type: 'ref/resource', uri: ref.uri };
  throw ProtocolError.invalidParams(
    'params.ref must be {type:"ref/prompt",name} or {type:"ref/resource",uri}',
  );
}

function completionContext(context: Params | undefined): CompletionContext | undefined {
  if (!context) return undefined;
  const args = context.arguments;
  if (args === undefined) return {};
  if (typeof args !== 'object' || args === null || Object.values(args).some((v) => typeof v !== 'string')) {
    throw ProtocolError.invalidParams('params.context.arguments must map names to strings');
  }
  return { arguments: args as Record<string, string> };
}

/**
 * The MCP methods shared by both eras, on top of the tool catalog, registered at init. Results are
 * era-neutral here; the era handlers add `resultType`, `_meta` and caching hints.
 */
@Injectable()
export class McpMethodsService implements OnModuleInit {
  constructor(
    private readonly catalog: ToolRegistry,
    private readonly methods: MethodRegistry,
    private readonly quotaService: QuotaService,
  ) {}

  onModuleInit(): void {
    const h: Record<SharedMethod, MethodHandler> = {
      'tools/list': async (p, ctx) =>
        this.page(
          p,
          this.catalog.listTools().map((t) => this.renderTool(t, ctx)),
          'tools',
        ),
      'resources/list': async (p) => this.page(p, this.catalog.listResources(), 'resources'),
      'resources/templates/list': async (p) =>
        this.page(p, this.catalog.listResourceTemplates(), 'resourceTemplates'),
      'resources/read': async (p, ctx) => ({
        ...(await this.catalog.readResource(str(p, 'uri'), this.toolContext(ctx))),
      }),
      'prompts/list': async (p) => this.page(p, this.catalog.listPrompts(), 'prompts'),
      'prompts/get': async (p, ctx) => ({
        ...(await this.catalog.getPrompt(str(p, 'name'), obj(p, 'arguments') ?? {}, this.toolContext(ctx))),
      }),
      'completion/complete': async (p) => {
        const ref = obj(p, 'ref', true)!;
        const argument = obj(p, 'argument', true)!;
        if (typeof argument.name !== 'string' || typeof argument.value !== 'string') {
          throw ProtocolError.invalidParams('params.argument needs string name and value');
        }
        const completion = await this.catalog.complete(
          completionRef(ref),
          { name: argument.name, value: argument.value },
          completionContext(obj(p, 'context')),
        );
        return { completion };
      },
    };
    for (const [m, fn] of Object.entries(h)) this.methods.register(m, fn, { eras: ['legacy', 'modern'] });
    this.methods.register('server/discover', async () => this.discoverResult(), { eras: ['modern'] });
  }

  capabilities(era: 'legacy' | 'modern'): Record<string, unknown> {
    const caps: Record<string, unknown> = {
      tools: { listChanged: false },
      resources: era === 'legacy' ? { subscribe: true, listChanged: false } : { listChanged: false },
      prompts: { listChanged: false },
      completions: {},
      logging: {},
    };
    // Tasks: core capability in the legacy era, the extension in 2026-07-28 (never both in one era).
    if (era === 'legacy') caps.tasks = { list: {}, cancel: {}, requests: { tools: { call: {} } } };
    else caps.extensions = { [TASKS_EXTENSION]: {} };
    return caps;
  }

  discoverResult(): Record<string, unknown> {
    return {
      supportedVersions: [...MODERN_VERSIONS],
      capabilities: this.capabilities('modern'),
      serverInfo: SERVER_INFO,
    };
  }

  /** Builds the ToolContext a handler sees from the request context. */
  toolContext(ctx: McpRequestContext, taskId?: string): ToolContext {
    const threshold = ctx.logLevel === null ? Infinity : LOG_LEVEL_ORDER.indexOf(ctx.logLevel);
    const run = ctx.run;
    return {
      principal: ctx.principal,
      signal: ctx.signal,
      protocolVersion: ctx.protocolVersion,
      era: ctx.era,
      taskId,
      clientCapabilities: ctx.clientCapabilities,
      input: ctx.input,
      closeSseStream: ctx.closeSseStream,
      progress: async (u) => {
        ctx.reportTaskProgress?.(u);
        if (ctx.progressToken === undefined) return;
        await ctx.notify('notifications/progress', { progressToken: ctx.progressToken, ...u });
      },
      log: async (level: LoggingLevel, data: unknown, logger?: string) => {
        if (LOG_LEVEL_ORDER.indexOf(level) < threshold) return;
        await ctx.notify('notifications/message', { level, data, ...(logger ? { logger } : {}) });
      },
      attempt: run?.attempt ?? 1,
      lastCheckpoint: run?.lastCheckpoint,
      // A call that can never become a task has nowhere to keep state; it is still checked, so a handler
      // that works here works as a task.
      checkpoint: run
        ? (state) => run.checkpoint(state)
        : async (state) => {
            this.quotaService.checkpointJson(state);
          },
    };
  }

  /** Runs the tool named in `params.name` inline (the plain tools/call, under any task decision). */
  async callTool(p: Params, ctx: McpRequestContext): Promise<Record<string, unknown>> {
    const name = str(p, 'name');
    const args = p.arguments === undefined ? {} : p.arguments;
    if (typeof args !== 'object' || args === null || Array.isArray(args)) {
      throw ProtocolError.invalidParams('params.arguments must be an object');
    }
    // The tool the era handler resolved for this call, when it is the one named here (no second lookup).
    const tool = ctx.tool?.name === name ? ctx.tool : name;
    return {
      ...(await this.catalog.callTool(tool, args, this.toolContext(ctx), { rethrow: ctx.rethrow })),
    };
  }

  private renderTool(t: ToolDescriptor, ctx: McpRequestContext): Record<string, unknown> {
    const out: Record<string, unknown> = { name: t.name };
    if (t.title) out.title = t.title;
    if (t.description) out.description = t.description;
    out.inputSchema = t.inputSchema;
    if (t.outputSchema) out.outputSchema = t.outputSchema;
    if (t.annotations) out.annotations = t.annotations;
    // execution.taskSupport exists on the wire only in 2025-11-25 (the version that has core tasks).
    if (ctx.era === 'legacy' && ctx.protocolVersion === '2025-11-25' && t.taskSupport !== 'forbidden') {
      out.execution = { taskSupport: t.taskSupport };
    }
    return out;
  }

  /** Lists are small and served whole; a cursor we never issued is refused rather than ignored. */
  private page(p: Params, items: unknown[], key: string): Record<string, unknown> {
    if (p.cursor !== undefined) throw ProtocolError.invalidParams('Invalid cursor');
    return { [key]: items };
  }
}
