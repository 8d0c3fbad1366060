import { Injectable } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper.js';
import {
  MCP_COMPLETION_DECORATOR,
  type McpCompletionOptions,
} from './decorators/mcp-completion.decorator.js';
import { MCP_PROMPT_DECORATOR, type McpPromptOptions } from './decorators/mcp-prompt.decorator.js';
import { MCP_RESOURCE_DECORATOR, type McpResourceOptions } from './decorators/mcp-resource.decorator.js';
import { MCP_TOOL_DECORATOR, type McpToolOptions } from './decorators/mcp-tool.decorator.js';
import { capProblems, MAX_PROBLEMS, type InputValidator } from './schema/input-validator.js';
import { SchemaCompiler } from './schema/schema-compiler.js';
import { completionKey, type DefinitionSource, type ToolCatalog } from './tool-catalog.js';
import type { TaskSupport } from './tool-context.js';
import { ToolDispatchError, ToolDispatchErrorCode } from './tool-dispatch.errors.js';
import type { PromptArgument, SchemaSource } from './tool-dispatch.types.js';
import { auditPolicyOf } from './tool-audit.js';
import { durabilityOf } from './tool-durability.js';
import { limitsOf } from './tool-limits.js';
import { UriTemplate } from './uri-template.js';
import { errorMessage } from '../common/error-message.js';

export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;
const URI_PATTERN = /^[A-Za-z][A-Za-z0-9+.-]*:\S*$/;
const TASK_SUPPORT: readonly TaskSupport[] = ['forbidden', 'optional', 'required'];
const EMPTY_INPUT = Object.freeze({ type: 'object', properties: {}, additionalProperties: false });

type Handler = (...args: unknown[]) => unknown;

interface Found<T> {
  options: T;
  handler: Handler;
  source: DefinitionSource;
}

/**
 * Finds every `@McpTool`, `@McpResource`, `@McpPrompt` and `@McpCompletion` method on the application's
 * providers and compiles them into a catalog. Any mistake (bad name, bad schema, duplicate, dangling completion
 * ref, request-scoped provider) stops startup with one message naming every offending `Class.method`, so a
 * broken tool module never reaches a client.
 */
@Injectable()
export class ToolExplorer {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
  ) {}

  explore(): ToolCatalog {
    const problems: string[] = [];
    const compiler = new SchemaCompiler();
    const catalog: ToolCatalog = {
      tools: new Map(),
      resources: new Map(),
      templates: new Map(),
      prompts: new Map(),
      completions: new Map(),
    };
    const found = this.scan(problems);
    const owners = new Map<string, DefinitionSource>();
    const claim = (key: string, label: string, source: DefinitionSource): boolean => {
      const previous = owners.get(key);
      if (previous) {
        problems.push(`${source}: ${label} is already declared by ${previous}`);
        return false;
      }
      owners.set(key, source);
      return true;
    };

    for (const { options, handler, source } of found.tools) {
      const where = `${source} (@McpTool)`;
      const name = options.name;
      if (typeof name !== 'string' || !TOOL_NAME_PATTERN.test(name)) {
        problems.push(`${where}: tool name ${JSON.stringify(name)} must match ${TOOL_NAME_PATTERN.source}`);
        continue;
      }
      if (!nonEmpty(options.description)) problems.push(`${where}: tool ${name} needs a description`);
      const taskSupport = options.taskSupport ?? 'forbidden';
      if (!TASK_SUPPORT.includes(taskSupport)) {
        problems.push(`${where}: taskSupport must be one of ${TASK_SUPPORT.join(', ')}`);
      }
      const durability = durabilityOf(options.durability, taskSupport, where, problems);
      const input = this.compile(compiler, options.input, `${where}: input of tool ${name}`, problems);
      const output =
        options.output === undefined
          ? undefined
          : this.compile(compiler, options.output, `${where}: output of tool ${name}`, problems);
      const limits = limitsOf(options.limits, taskSupport, input?.schema, where, problems);
      const audit = input
        ? auditPolicyOf(
            options.audit,
            { taskSupport, input: input.schema, ...(output ? { output: output.schema } : {}) },
            where,
            problems,
          )
        : undefined;
      if (
        !claim(`tool:${name}`, `tool ${name}`, source) ||
        !input ||
        !audit ||
        (options.output !== undefined && !output)
      ) {
        continue;
      }
      catalog.tools.set(name, {
        descriptor: {
          name,
          ...(options.title !== undefined ? { title: options.title } : {}),
          description: options.description,
          inputSchema: input.schema,
          ...(output ? { outputSchema: output.schema } : {}),
          ...(options.annotations ? { annotations: { ...options.annotations } } : {}),
          taskSupport,
          scopes: Object.freeze([...(options.scopes ?? [])]),
          durability,
          ...(limits ? { limits } : {}),
          audit,
        },
        input,
        ...(output ? { output } : {}),
        handler,
        source,
      });
    }

    for (const { options, handler, source } of found.resources) {
      const where = `${source} (@McpResource)`;
      if (!nonEmpty(options.name)) problems.push(`${where}: resource needs a name`);
      if (!nonEmpty(options.description)) problems.push(`${where}: resource needs a description`);
      const common = {
        name: options.name,
        ...(options.title !== undefined ? { title: options.title } : {}),
        description: options.description,
        ...(options.mimeType !== undefined ? { mimeType: options.mimeType } : {}),
      };
      if ('uriTemplate' in options) {
        let template: UriTemplate;
        try {
          template = new UriTemplate(options.uriTemplate);
        } catch (err) {
          problems.push(`${where}: ${(err as Error).message}`);
          continue;
        }
        if (!claim(`template:${options.uriTemplate}`, `resource template ${options.uriTemplate}`, source))
          continue;
        catalog.templates.set(options.uriTemplate, {
          descriptor: { uriTemplate: options.uriTemplate, ...common },
          template,
          handler,
          source,
        });
      } else {
        if (typeof options.uri !== 'string' || !URI_PATTERN.test(options.uri)) {
          problems.push(`${where}: resource uri ${JSON.stringify(options.uri)} must be an absolute URI`);
          continue;
        }
        if (!claim(`resource:${options.uri}`, `resource ${options.uri}`, source)) continue;
        catalog.resources.set(options.uri, { descriptor: { uri: options.uri, ...common }, handler, source });
      }
    }

    for (const { options, handler, source } of found.prompts) {
      const where = `${source} (@McpPrompt)`;
      if (!nonEmpty(options.name)) {
        problems.push(`${where}: prompt needs a name`);
        continue;
      }
      if (!nonEmpty(options.description))
        problems.push(`${where}: prompt ${options.name} needs a description`);
      let dto: InputValidator | undefined;
      let args: PromptArgument[] | undefined;
      if (typeof options.arguments === 'function') {
        dto = this.compile(
          compiler,
          options.arguments,
          `${where}: arguments of prompt ${options.name}`,
          problems,
        );
        if (!dto) continue;
        args = promptArgumentsFromSchema(dto.schema);
      } else if (options.arguments !== undefined) {
        args = options.arguments.map((a) => ({ ...a }));
        const names = args.map((a) => a.name);
        const repeated = names.filter((n, i) => names.indexOf(n) !== i);
        if (args.some((a) => !nonEmpty(a.name)))
          problems.push(`${where}: every prompt argument needs a name`);
        if (repeated.length > 0) problems.push(`${where}: prompt argument ${repeated[0]} is declared twice`);
      }
      if (!claim(`prompt:${options.name}`, `prompt ${options.name}`, source)) continue;
      catalog.prompts.set(options.name, {
        descriptor: {
          name: options.name,
          ...(options.title !== undefined ? { title: options.title } : {}),
          description: options.description,
          ...(args ? { arguments: args } : {}),
        },
        ...(dto ? { dto } : {}),
        handler,
        source,
      });
    }

    for (const { options, handler, source } of found.completions) {
      const where = `${source} (@McpCompletion)`;
      const ref = options.ref;
      const exists =
        ref?.type === 'ref/prompt'
          ? catalog.prompts.has(ref.name)
          : ref?.type === 'ref/resource'
            ? catalog.templates.has(ref.uri) || catalog.resources.has(ref.uri)
            : false;
      if (!exists) {
        problems.push(`${where}: ref ${JSON.stringify(ref)} names no declared prompt or resource template`);
        continue;
      }
      const key = completionKey(ref);
      if (!claim(`completion:${key}`, `completion for ${key}`, source)) continue;
      catalog.completions.set(key, { ref, handler, source });
    }

    if (problems.length > 0) {
      throw new ToolDispatchError(
        ToolDispatchErrorCode.INVALID_DEFINITION,
        `Invalid MCP tool definitions:\n${problems.map((p) => `  - ${p}`).join('\n')}`,
        { problems },
      );
    }
    return catalog;
  }

  private compile(
    compiler: SchemaCompiler,
    source: SchemaSource | undefined,
    where: string,
    problems: string[],
  ): InputValidator | undefined {
    if (source === undefined) return { schema: EMPTY_INPUT, validate: emptyInputValidate };
    try {
      return compiler.compile(source);
    } catch (err) {
      problems.push(`${where}: ${errorMessage(err)}`);
      return undefined;
    }
  }

  private scan(problems: string[]) {
    const tools: Found<McpToolOptions>[] = [];
    const resources: Found<McpResourceOptions>[] = [];
    const prompts: Found<McpPromptOptions>[] = [];
    const completions: Found<McpCompletionOptions>[] = [];
    const decorators = [
      [MCP_TOOL_DECORATOR, tools],
      [MCP_RESOURCE_DECORATOR, resources],
      [MCP_PROMPT_DECORATOR, prompts],
      [MCP_COMPLETION_DECORATOR, completions],
    ] as const;

    for (const wrapper of this.discovery.getProviders()) {
      const prototype = prototypeOf(wrapper);
      if (!prototype) continue;
      const className =
        (wrapper.metatype as { name?: string } | undefined)?.name ?? String(wrapper.name as unknown);
      for (const method of this.scanner.getAllMethodNames(prototype)) {
        const fn = (prototype as Record<string, unknown>)[method];
        if (typeof fn !== 'function') continue;
        for (const [decorator, list] of decorators) {
          const options = Reflect.getMetadata(decorator.KEY, fn) as never;
          if (options === undefined) continue;
          const source = `${className}.${method}`;
          if (!wrapper.isDependencyTreeStatic() || !wrapper.instance) {
            problems.push(
              `${source}: MCP handlers must live on singleton providers (this one is request-scoped)`,
            );
            continue;
          }
          const instance = wrapper.instance as Record<string, Handler>;
          (list as Found<never>[]).push({ options, handler: instance[method].bind(instance), source });
        }
      }
    }
    return { tools, resources, prompts, completions };
  }
}

function prototypeOf(wrapper: InstanceWrapper): object | undefined {
  const metatype = wrapper.metatype as { prototype?: unknown } | null | undefined;
  if (wrapper.instance && typeof wrapper.instance === 'object') {
    return Object.getPrototypeOf(wrapper.instance) as object;
  }
  return typeof metatype?.prototype === 'object' ? (metatype.prototype as object) : undefined;
}

function nonEmpty(value: unknown): value is string {
  return typeof value === 'string' && value.trim().length > 0;
}

async function emptyInputValidate(value: unknown, root: string) {
  if (value === undefined || value === null) return { ok: true as const, value: {} };
  if (typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false as const, problems: [`${root} must be an object`] };
  }
  const extra = Object.keys(value);
  if (extra.length === 0) return { ok: true as const, value: {} };
  const shown = extra.slice(0, MAX_PROBLEMS);
  return {
    ok: false as const,
    problems: capProblems(
      shown.map((k) => `${root}.${k} is not allowed (this tool takes no arguments)`),
      extra.length,
    ),
  };
}

function promptArgumentsFromSchema(schema: Record<string, unknown>): PromptArgument[] {
  const properties = (schema.properties ?? {}) as Record<string, { description?: string }>;
  const required = new Set((schema.required ?? []) as string[]);
  return Object.entries(properties).map(([name, property]) => ({
    name,
    ...(property.description !== undefined ? { description: property.description } : {}),
    required: required.has(name),
  }));
}
