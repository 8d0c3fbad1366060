import type { McpSession } from '../sessions/session.entity.js';
import type {
  ElicitParams,
  ElicitResult,
  InputApi,
  RootsResult,
  SampleParams,
  SampleResult,
} from '../tool-dispatch/tool-context.js';
import type { ClientRequestsService } from './client-requests.service.js';
import type { ResponseChannel } from './response-channel.js';

const CAPABILITY: Record<string, string> = {
  'elicitation/create': 'elicitation',
  'sampling/createMessage': 'sampling',
  'roots/list': 'roots',
};

/** Legacy era: a question is a server-to-client request on the stream of the call that asks it. */
export class LegacyInput implements InputApi {
  constructor(
    private readonly session: McpSession,
    private readonly channel: ResponseChannel,
    private readonly requests: ClientRequestsService,
    private readonly signal: AbortSignal,
  ) {}

  elicit(params: ElicitParams): Promise<ElicitResult> {
    return this.ask('elicitation/create', { mode: 'form', ...params }) as Promise<ElicitResult>;
  }

  sample(params: SampleParams): Promise<SampleResult> {
    return this.ask('sampling/createMessage', params) as Promise<SampleResult>;
  }

  listRoots(): Promise<RootsResult> {
    return this.ask('roots/list', {}) as Promise<RootsResult>;
  }

  private async ask(method: string, params: Record<string, unknown>): Promise<Record<string, unknown>> {
    const capability = CAPABILITY[method];
    if (!Object.hasOwn(this.session.clientCapabilities, capability)) {
      throw new Error(`The client did not declare the ${capability} capability, so ${method} cannot be sent`);
    }
    const streamId = await this.channel.openStream();
    return this.requests.request(this.session.id, streamId, method, params, this.signal);
  }
}
