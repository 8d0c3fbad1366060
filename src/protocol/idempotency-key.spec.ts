import { idempotencyKeyOf } from './idempotency-key.js';
import { ProtocolError } from './protocol.errors.js';

describe('idempotencyKeyOf (the Idempotency-Key header)', () => {
  it('takes 1 to 255 visible ASCII characters as they are, and no header as no key', () => {
    expect(idempotencyKeyOf(undefined)).toBeUndefined();
    for (const key of [
      'a',
      'x'.repeat(255),
      '0b2c7f0e-8c1d-4f59-9a1e-3c1e2f4d5a6b',
      '"quoted"~!#$%&*+/=?^_`{|}',
    ]) {
      expect(idempotencyKeyOf(key)).toBe(key);
    }
  });

  it.each([
    ['empty', ''],
    ['too long', 'x'.repeat(256)],
    ['a space (also how Node joins two headers)', 'a, b'],
    ['a tab', 'a\tb'],
    ['non-ASCII', 'caf\u00e9'],
    ['a control character', 'a\u0007'],
  ])('refuses %s with -32602 naming the header (HTTP 400)', (_what, raw) => {
    let caught: unknown;
    try {
      idempotencyKeyOf(raw);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ProtocolError);
    expect(caught).toMatchObject({
      code: -32602,
      httpStatus: 400,
      message: expect.stringMatching(/^Idempotency-Key header must be 1 to 255 visible ASCII characters/),
      data: { header: 'Idempotency-Key' },
    });
  });
});
