import { InputRequiredSignal, MrtrInput } from './mrtr-input.js';
import { ProtocolError } from './protocol.errors.js';

describe('MrtrInput', () => {
  const ask = { message: 'Name?', requestedSchema: { type: 'object', properties: {} } };

  it('collects questions asked together, then ends the round with all of them', async () => {
    const input = new MrtrInput({}, { elicitation: {} });
    const both = Promise.all([input.elicit(ask, { key: 'a' }), input.elicit(ask, { key: 'b' })]);
    const err = await both.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputRequiredSignal);
    expect(Object.keys((err as InputRequiredSignal).requests)).toEqual(['a', 'b']);
    expect((err as InputRequiredSignal).requests.a).toEqual({ method: 'elicitation/create', params: ask });
  });

  it('returns known answers and derives stable keys from call order', async () => {
    const input = new MrtrInput({ input_1: { action: 'accept', content: { n: 1 } } }, { elicitation: {} });
    await expect(input.elicit(ask)).resolves.toEqual({ action: 'accept', content: { n: 1 } });
    const second = await input.elicit(ask).catch((e: unknown) => e);
    expect(Object.keys((second as InputRequiredSignal).requests)).toEqual(['input_2']);
  });

  it('refuses input kinds the client did not declare with -32021', async () => {
    const input = new MrtrInput({}, {});
    const err = await input.sample({ messages: [], maxTokens: 5 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProtocolError);
    expect((err as ProtocolError).code).toBe(-32021);
    expect((err as ProtocolError).data).toEqual({ requiredCapabilities: { sampling: {} } });
  });

  it('finds no answer for keys that only Object.prototype has', async () => {
    const input = new MrtrInput({}, { elicitation: {} });
    for (const key of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      const err = await input.elicit(ask, { key }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InputRequiredSignal);
    }
    const own = new MrtrInput(Object.fromEntries([['constructor', { action: 'decline' }]]), {});
    await expect(own.elicit(ask, { key: 'constructor' })).resolves.toEqual({ action: 'decline' });
  });
});
