import { ANONYMOUS_PRINCIPAL, type Principal } from '../../src/principals/principal.js';
import type {
  ElicitParams,
  ElicitResult,
  InputRequestOptions,
  JsonObject,
  LoggingLevel,
  ProgressUpdate,
  RootsResult,
  SampleParams,
  SampleResult,
  ToolContext,
} from '../../src/tool-dispatch/index.js';

export interface RecordedInput {
  method: 'elicitation/create' | 'sampling/createMessage' | 'roots/list';
  params: JsonObject;
  key?: string;
}

export interface RecordingAnswers {
  elicit?: (params: ElicitParams) => ElicitResult | Promise<ElicitResult>;
  sample?: (params: SampleParams) => SampleResult | Promise<SampleResult>;
  roots?: () => RootsResult | Promise<RootsResult>;
}

/**
 * Test scaffolding: a ToolContext that records every progress, log and input call and answers input requests
 * from scripted callbacks. The handlers and the registry under test are real.
 */
export class RecordingToolContext implements ToolContext {
  readonly progressUpdates: ProgressUpdate[] = [];
  readonly logs: { level: LoggingLevel; data: unknown; logger?: string; at: number }[] = [];
  readonly inputs: RecordedInput[] = [];
  readonly controller = new AbortController();
  readonly protocolVersion = '2025-11-25';
  readonly era = 'legacy' as const;
  readonly principal: Principal;
  readonly taskId?: string;
  readonly clientCapabilities?: JsonObject;
  readonly input: ToolContext['input'];

  constructor(
    answers: RecordingAnswers = {},
    options: { principal?: Principal; taskId?: string; clientCapabilities?: JsonObject } = {},
  ) {
    this.principal = options.principal ?? ANONYMOUS_PRINCIPAL;
    if (options.taskId !== undefined) this.taskId = options.taskId;
    if (options.clientCapabilities !== undefined) this.clientCapabilities = options.clientCapabilities;
    const record = (method: RecordedInput['method'], params: JsonObject, opts?: InputRequestOptions) => {
      this.inputs.push({ method, params, ...(opts?.key !== undefined ? { key: opts.key } : {}) });
    };
    this.input = {
      elicit: async (params, opts) => {
        record('elicitation/create', params, opts);
        if (!answers.elicit) throw new Error('test context: no elicitation answer scripted');
        return answers.elicit(params);
      },
      sample: async (params, opts) => {
        record('sampling/createMessage', params, opts);
        if (!answers.sample) throw new Error('test context: no sampling answer scripted');
        return answers.sample(params);
      },
      listRoots: async (opts) => {
        record('roots/list', {}, opts);
        if (!answers.roots) throw new Error('test context: no roots answer scripted');
        return answers.roots();
      },
    };
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  async progress(update: ProgressUpdate): Promise<void> {
    this.progressUpdates.push(update);
  }

  async log(level: LoggingLevel, data: unknown, logger?: string): Promise<void> {
    this.logs.push({ level, data, ...(logger !== undefined ? { logger } : {}), at: Date.now() });
  }
}
