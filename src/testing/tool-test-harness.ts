import 'reflect-metadata';
import { Global, Module, type DynamicModule, type INestApplicationContext, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ConfigModule } from '../config/config.module.js';
import { loadConfig } from '../app.config.js';
import type { Principal } from '../principals/principal.js';
import {
  McpControlSignal,
  McpNotifier,
  type CallToolResult,
  type CompleteResult,
  type CompletionArgument,
  type CompletionRef,
  type GetPromptResult,
  type ReadResourceResult,
  type InputRequestOptions,
  type JsonObject,
  type JsonValue,
  type ProgressUpdate,
  type ToolContext,
} from '../tool-dispatch/index.js';
import { ToolDispatchModule } from '../tool-dispatch/tool-dispatch.module.js';
import type { ToolDescriptor } from '../tool-dispatch/tool-dispatch.types.js';
import { ToolRegistry } from '../tool-dispatch/tool-registry.service.js';
import {
  RecordingToolContext,
  type RecordedInput,
  type RecordedLog,
  type ScriptedAnswers,
} from './recording-tool-context.js';

/** Records `McpNotifier.resourceUpdated` calls instead of sending them to sessions. */
export class RecordingNotifier extends McpNotifier {
  readonly updatedUris: string[] = [];
  async resourceUpdated(uri: string): Promise<number> {
    this.updatedUris.push(uri);
    return 0;
  }
}

export interface ToolHarnessOptions {
  /** Environment for the validated config classes the modules may inject (defaults for everything unset). */
  env?: Record<string, string>;
}

export interface CallOptions {
  /** Who calls. Default: the anonymous development principal, which is never scope-checked. */
  principal?: Principal;
  /** Scripted client answers to `ctx.input.elicit / sample / listRoots`. */
  answers?: ScriptedAnswers;
  /** Cancels the call when aborted (`ctx.signal`). */
  signal?: AbortSignal;
  /** Pretend the call runs as this task (`ctx.taskId`). */
  taskId?: string;
  clientCapabilities?: JsonObject;
  /** Called at each `ctx.progress(...)` as it happens (the outcome lists them all too). */
  onProgress?: (update: ProgressUpdate) => void;
  /** Pretend this is attempt N of a task (`ctx.attempt`) resumed from this checkpoint (`ctx.lastCheckpoint`). */
  attempt?: number;
  lastCheckpoint?: JsonValue;
  /**
   * Run the handler the 2026-07-28 way: each question ends the run, and the handler is run again from the
   * top with every answer so far (which `ctx.input` then returns at once). Use it to check that a handler
   * reaches the same questions, in the same order, on every run and does its side effects once.
   */
  rerunOnInput?: boolean;
}

/**
 * A `CallToolResult` whose `structuredContent` has the type the test names, e.g. the tool's output class. The
 * type is the test's claim, not a check: the registry has already validated the content against the output
 * schema when the tool declares one. Absent on an `isError` result, hence optional.
 */
export type TypedCallToolResult<S = JsonObject> = Omit<CallToolResult, 'structuredContent'> & {
  structuredContent?: S;
};

/**
 * What one call produced: the result as the client would get it, and everything the handler sent on the way.
 * `S` types `result.structuredContent` (default: a plain JSON object).
 */
export interface CallOutcome<S = JsonObject> {
  result: TypedCallToolResult<S>;
  progress: ProgressUpdate[];
  logs: RecordedLog[];
  /** The distinct input requests, in the order they were first asked. */
  inputs: RecordedInput[];
  /** How many times the handler ran (1 unless `rerunOnInput`). */
  runs: number;
}

/** Ends one run when a question has no recorded answer yet; the harness then runs the handler again. */
class AnswerCollected extends McpControlSignal {
  constructor() {
    super('input collected; the handler runs again');
  }
}

@Global()
@Module({})
class HarnessNotifierModule {}

@Module({})
class HarnessRoot {}

/**
 * Unit-level testing of one tool module: a Nest application context holding only the given modules, the
 * tool-dispatch registry and the validated config, so tools are discovered, validated, scope-checked and their
 * results normalised exactly as in the server, with no database and no HTTP.
 *
 * ```ts
 * const tools = await ToolTestHarness.create([ReportsModule], { env: { EXAMPLE_REPORT_STEP_MS: '1' } });
 * const { result, progress } = await tools.call('generate_report', { steps: 3 });
 * await tools.close();
 * ```
 */
export class ToolTestHarness {
  private constructor(
    readonly app: INestApplicationContext,
    readonly registry: ToolRegistry,
    readonly notifier: RecordingNotifier,
  ) {}

  static async create(
    modules: (Type | DynamicModule)[],
    options: ToolHarnessOptions = {},
  ): Promise<ToolTestHarness> {
    const notifier = new RecordingNotifier();
    const notifierModule: DynamicModule = {
      module: HarnessNotifierModule,
      providers: [{ provide: McpNotifier, useValue: notifier }],
      exports: [McpNotifier],
    };
    const root: DynamicModule = {
      module: HarnessRoot,
      imports: [
        ConfigModule.forRoot(loadConfig({ LOG_LEVEL: 'warn', ...options.env })),
        notifierModule,
        ToolDispatchModule,
        ...modules,
      ],
    };
    // abortOnError false: a bad tool definition rejects here with the registry's message instead of exiting.
    const app = await NestFactory.createApplicationContext(root, { logger: false, abortOnError: false });
    return new ToolTestHarness(app, app.get(ToolRegistry), notifier);
  }

  /** The tool as `tools/list` describes it (schemas derived from the DTOs), or undefined. */
  describe(name: string): ToolDescriptor | undefined {
    return this.registry.getTool(name);
  }

  /**
   * Calls one tool with arguments validated as the server validates them. Refusals (unknown tool, bad
   * arguments, missing scopes) reject with a `ToolDispatchError` whose `code` names the refusal; a tool
   * failure is an `isError` result; a cancelled call rejects with the abort error.
   *
   * `S` types `result.structuredContent`, so assertions need no cast:
   * `const { result } = await tools.call<RefundOutcome>('approve_refund', args); result.structuredContent?.refundId`.
   */
  async call<S = JsonObject>(
    name: string,
    args: unknown = {},
    options: CallOptions = {},
  ): Promise<CallOutcome<S>> {
    const outcome = options.rerunOnInput
      ? await this.callWithReruns(name, args, options)
      : await this.callOnce(name, args, options);
    // The registry returns structuredContent as a JSON object; S is the caller's name for its shape.
    return outcome as CallOutcome<S>;
  }

  private async callOnce(name: string, args: unknown, options: CallOptions): Promise<CallOutcome> {
    const ctx = new RecordingToolContext(options.answers, contextOptions(options, 'legacy'));
    const result = await this.registry.callTool(name, args, ctx);
    return { result, progress: ctx.progressUpdates, logs: ctx.logs, inputs: ctx.inputs, runs: 1 };
  }

  private async callWithReruns(name: string, args: unknown, options: CallOptions): Promise<CallOutcome> {
    const answered = new Map<string, unknown>();
    const inputs: RecordedInput[] = [];
    const progress: ProgressUpdate[] = [];
    const logs: RecordedLog[] = [];
    // One scripted client for the whole call: each question is put to it once, like a real client.
    const client = new RecordingToolContext(options.answers, contextOptions(options, 'modern'));
    for (let runs = 1; ; runs++) {
      const ctx = new RecordingToolContext({}, contextOptions(options, 'modern'));
      let asked = 0;
      const ask = async <T>(
        method: RecordedInput['method'],
        opts: InputRequestOptions | undefined,
        put: () => Promise<T>,
      ): Promise<T> => {
        asked += 1;
        const key = opts?.key ?? `${method}#${asked}`;
        if (answered.has(key)) return answered.get(key) as T;
        answered.set(key, await put());
        inputs.push(client.inputs[client.inputs.length - 1]);
        throw new AnswerCollected();
      };
      const input: ToolContext['input'] = {
        elicit: (p, o) => ask('elicitation/create', o, () => client.input.elicit(p, o)),
        sample: (p, o) => ask('sampling/createMessage', o, () => client.input.sample(p, o)),
        listRoots: (o) => ask('roots/list', o, () => client.input.listRoots(o)),
      };
      Object.assign(ctx, { input });
      try {
        const result = await this.registry.callTool(name, args, ctx);
        progress.push(...ctx.progressUpdates);
        logs.push(...ctx.logs);
        return { result, progress, logs, inputs, runs };
      } catch (err) {
        progress.push(...ctx.progressUpdates);
        logs.push(...ctx.logs);
        if (!(err instanceof AnswerCollected)) throw err;
      }
    }
  }

  /** `resources/read` of a fixed resource or a template match; RESOURCE_NOT_FOUND rejects. */
  async readResource(uri: string, options: CallOptions = {}): Promise<ReadResourceResult> {
    return this.registry.readResource(
      uri,
      new RecordingToolContext(options.answers, contextOptions(options, 'legacy')),
    );
  }

  /** `prompts/get`, arguments validated as the server validates them. */
  async getPrompt(
    name: string,
    args: Record<string, unknown> = {},
    options: CallOptions = {},
  ): Promise<GetPromptResult> {
    return this.registry.getPrompt(
      name,
      args,
      new RecordingToolContext(options.answers, contextOptions(options, 'legacy')),
    );
  }

  /** `completion/complete` for a prompt or resource-template argument. */
  async complete(ref: CompletionRef, argument: CompletionArgument): Promise<CompleteResult> {
    return this.registry.complete(ref, argument);
  }

  async close(): Promise<void> {
    await this.app.close();
  }
}

function contextOptions(options: CallOptions, era: 'legacy' | 'modern') {
  return {
    era,
    ...(options.principal ? { principal: options.principal } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.taskId !== undefined ? { taskId: options.taskId } : {}),
    ...(options.clientCapabilities ? { clientCapabilities: options.clientCapabilities } : {}),
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    ...(options.attempt !== undefined ? { attempt: options.attempt } : {}),
    ...(options.lastCheckpoint !== undefined ? { lastCheckpoint: options.lastCheckpoint } : {}),
  };
}
