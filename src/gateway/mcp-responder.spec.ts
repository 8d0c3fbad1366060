import type { JsonRpcResponse } from '../protocol/json-rpc.js';
import { McpResponder } from './mcp-responder.js';
import type { ResponseChannel } from './response-channel.js';

/** A channel whose first `failures` answers cannot be sent, as one that will not serialise or store. */
class FailingChannel implements ResponseChannel {
  readonly answers: JsonRpcResponse[] = [];
  ended = false;

  constructor(private failures: number) {}

  async emit(): Promise<void> {}
  async openStream(): Promise<string> {
    return 'stream';
  }
  async abandon(): Promise<void> {}
  end(): void {
    this.ended = true;
  }
  async respond(message: JsonRpcResponse): Promise<void> {
    if (this.failures-- > 0) throw new RangeError('Maximum call stack size exceeded');
    this.answers.push(message);
  }
}

describe('McpResponder: a request always ends', () => {
  const executor = new McpResponder();

  it('answers with an error when the result itself cannot be sent', async () => {
    const channel = new FailingChannel(1);
    await executor.run('legacy', 5, channel, async () => ({ content: [] }));
    expect(channel.answers).toHaveLength(1);
    expect(channel.answers[0]).toMatchObject({ id: 5, error: { code: -32603 } });
    expect(channel.ended).toBe(false);
  });

  it('answers with an error when a mapped error cannot be sent either', async () => {
    const channel = new FailingChannel(1);
    await executor.run('modern', 6, channel, () => Promise.reject(new Error('boom')));
    expect(channel.answers).toEqual([expect.objectContaining({ id: 6, error: expect.any(Object) })]);
  });

  it('ends the stream when not even an error can be sent', async () => {
    const channel = new FailingChannel(2);
    await executor.run('legacy', 7, channel, async () => ({ content: [] }));
    expect(channel.answers).toEqual([]);
    expect(channel.ended).toBe(true);
  });
});
