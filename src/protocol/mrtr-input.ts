import {
  McpControlSignal,
  type ElicitParams,
  type ElicitResult,
  type InputApi,
  type InputRequestOptions,
  type RootsResult,
  type SampleParams,
  type SampleResult,
} from '../tool-dispatch/tool-context.js';
import { ProtocolError } from './protocol.errors.js';

export interface InputRequest {
  method: string;
  params?: Record<string, unknown>;
}

/** Raised inside a handler when it needs answers this round does not have; ends the round. */
export class InputRequiredSignal extends McpControlSignal {
  constructor(readonly requests: Record<string, InputRequest>) {
    super('input required');
    this.name = 'InputRequiredSignal';
  }
}

const CAPABILITY: Record<string, string> = {
  'elicitation/create': 'elicitation',
  'sampling/createMessage': 'sampling',
  'roots/list': 'roots',
};

/**
 * The InputApi of the modern era (MRTR) and of tasks: each question has a key; a question whose answer
 * is known returns it, the others are collected and the round ends with `input_required`. The handler is
 * run again from the start in the next round with every answer so far, so keys must be reproducible: named
 * by the tool (`options.key`) or derived from the call order.
 */
export class MrtrInput implements InputApi {
  private counter = 0;
  readonly pending: Record<string, InputRequest> = {};

  constructor(
    private readonly answers: Record<string, unknown>,
    private readonly clientCapabilities: Record<string, unknown>,
  ) {}

  elicit(params: ElicitParams, options?: InputRequestOptions): Promise<ElicitResult> {
    return this.ask<ElicitResult>('elicitation/create', params, options);
  }

  sample(params: SampleParams, options?: InputRequestOptions): Promise<SampleResult> {
    return this.ask<SampleResult>('sampling/createMessage', params, options);
  }

  listRoots(options?: InputRequestOptions): Promise<RootsResult> {
    return this.ask<RootsResult>('roots/list', {}, options);
  }

  private ask<T>(method: string, params: Record<string, unknown>, options?: InputRequestOptions): Promise<T> {
    const key = options?.key ?? `input_${++this.counter}`;
    // Own keys only: a key named `constructor` has no answer just because every object inherits one.
    if (Object.hasOwn(this.answers, key)) return Promise.resolve(this.answers[key] as T);
    const capability = CAPABILITY[method];
    if (capability && !Object.hasOwn(this.clientCapabilities, capability)) {
      // Thrown synchronously into the handler: it ends the call with -32021 rather than a tool error.
      return Promise.reject(ProtocolError.missingCapability({ [capability]: {} }));
    }
    this.pending[key] = { method, params };
    // Rejected a tick later so that questions asked together (Promise.all) are all collected first.
    return new Promise<T>((_, reject) =>
      setImmediate(() => reject(new InputRequiredSignal({ ...this.pending }))),
    );
  }
}
