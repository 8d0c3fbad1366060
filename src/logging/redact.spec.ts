import { redactSecrets } from './redact.js';

describe('redactSecrets', () => {
  it.each([
    ['Authorization: Bearer abc.def.ghi', 'abc.def.ghi'],
    ['authorization=Basic dXNlcjpwYXNz', 'dXNlcjpwYXNz'],
    ['postgres://svc:pa55word@10.0.0.1:5432/db', 'pa55word'],
    ['GET https://idp.example/jwks?access_token=tok123&x=1', 'tok123'],
    ['GET /cb?code=1&client_secret=cs-999', 'cs-999'],
    ['key mcpk_01HXYZ_AbC-dEf_123 refused', 'AbC-dEf_123'],
    ['{"password":"pw-in-json","user":"u"}', 'pw-in-json'],
    ["config secret='quoted value'", 'quoted value'],
  ])('removes the secret from %s', (input, secret) => {
    const out = redactSecrets(input);
    expect(out).not.toContain(secret);
    expect(out).toContain('[REDACTED]');
  });

  it('leaves ordinary text alone', () => {
    const text = 'authentication refused: invalid_token (expired); task abc failed: Task expired';
    expect(redactSecrets(text)).toBe(text);
    expect(redactSecrets('postgres://svc@db:5432/mcp')).toBe('postgres://svc@db:5432/mcp');
  });
});
