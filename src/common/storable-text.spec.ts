import { hasNul, jsonHasNul, unstorableText } from './storable-text.js';

describe('text PostgreSQL cannot store', () => {
  it('names where a NUL character or an unpaired surrogate is, in values and in keys', () => {
    expect(unstorableText({ a: [1, { b: 'x\u0000' }] }, 'params')).toBe(
      'params.a[1].b contains a NUL character (\\u0000)',
    );
    expect(unstorableText({ ['k\ud800']: 1 }, 'result')).toBe(
      'a key of result contains an unpaired UTF-16 surrogate',
    );
    expect(unstorableText({ a: { b: '\udc00' } }, '')).toBe('a.b contains an unpaired UTF-16 surrogate');
  });

  it('passes text that is fine, paired surrogates (emoji) and a literal backslash-u0000 included', () => {
    expect(unstorableText({ a: 'Ada 😀', b: '\\u0000', c: [null, 1, true] }, 'x')).toBeNull();
    expect(jsonHasNul(JSON.stringify({ b: '\\u0000' }))).toBe(false);
    expect(jsonHasNul(JSON.stringify({ b: '\\\\u0000', c: 'x\u0000' }))).toBe(true);
    expect(jsonHasNul(JSON.stringify('\u0000'))).toBe(true);
    expect(hasNul('a\u0000')).toBe(true);
    expect(hasNul(null)).toBe(false);
  });

  it('walks any depth without recursion', () => {
    let deep: unknown = 'end\u0000';
    for (let i = 0; i < 200000; i++) deep = [deep];
    expect(unstorableText(deep, 'v')).toMatch(/^v(\[0\]){200000} contains a NUL character/);
  });
});
