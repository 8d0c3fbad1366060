import { paramsDigest, RequestStateCodec, RequestStateError } from './request-state.js';

describe('RequestStateCodec', () => {
  const codec = new RequestStateCodec('a-secret-that-is-long-enough-for-hmac-use');
  const params = { name: 'tool', arguments: { a: 1 } };
  const expect_ = { principalId: 'p1', method: 'tools/call', paramsDigest: paramsDigest(params) };
  const fresh = (): string =>
    codec.encode({ ...expect_, expiresAt: Date.now() + 60000, answers: { k: { action: 'accept' } } });

  it('round-trips answers for the same principal, method and params', () => {
    const token = fresh();
    expect(codec.decode(token, expect_).answers).toEqual({ k: { action: 'accept' } });
  });

  it('ignores the envelope and MRTR fields when digesting params, but not argument changes', () => {
    expect(paramsDigest({ ...params, _meta: { x: 1 }, inputResponses: {}, requestState: 'x' })).toBe(
      paramsDigest(params),
    );
    expect(paramsDigest({ name: 'tool', arguments: { a: 2 } })).not.toBe(paramsDigest(params));
    expect(paramsDigest({ arguments: { a: 1 }, name: 'tool' })).toBe(paramsDigest(params));
  });

  it.each([
    [
      'a tampered body',
      (t: string) => `${Buffer.from('{"principalId":"p1"}').toString('base64url')}.${t.split('.')[1]}`,
      /integrity/,
    ],
    ['a tampered mac', (t: string) => `${t.split('.')[0]}.AAAA${t.split('.')[1].slice(4)}`, /integrity/],
    ['garbage', () => 'not-a-token', /malformed/],
  ])('refuses %s', (_label, mutate, message) => {
    expect(() => codec.decode(mutate(fresh()), expect_)).toThrow(message);
  });

  it('refuses expired state, another principal, another method or other params', () => {
    const expired = codec.encode({ ...expect_, expiresAt: Date.now() - 1, answers: {} });
    expect(() => codec.decode(expired, expect_)).toThrow(/expired/);
    const t = fresh();
    expect(() => codec.decode(t, { ...expect_, principalId: 'p2' })).toThrow(/another caller/);
    expect(() => codec.decode(t, { ...expect_, method: 'prompts/get' })).toThrow(/does not match/);
    expect(() => codec.decode(t, { ...expect_, paramsDigest: 'x' })).toThrow(RequestStateError);
  });

  it('refuses state minted with another key', () => {
    const other = new RequestStateCodec('another-secret-that-is-long-enough-for-hmac');
    const t = other.encode({ ...expect_, expiresAt: Date.now() + 60000, answers: {} });
    expect(() => codec.decode(t, expect_)).toThrow(/integrity/);
  });
});
