import type { Request } from 'express';
import { AdminConfig } from './admin.config.js';
import { AdminCsrf, CSRF_FIELD } from './admin-csrf.js';

function req(headers: Record<string, string>, body: Record<string, unknown>): Request {
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  return { header: (name: string) => lower[name.toLowerCase()], body } as unknown as Request;
}

describe('AdminCsrf', () => {
  const config = Object.assign(new AdminConfig(), { ADMIN_CSRF_SECRET: 'k'.repeat(32) });
  const csrf = new AdminCsrf(config);
  const token = csrf.tokenFor('proxy:alice');
  const same = {
    host: 'console.example:8443',
    origin: 'https://console.example:8443',
    'sec-fetch-site': 'same-origin',
  };

  it('binds the token to the principal and the key', () => {
    expect(csrf.tokenFor('proxy:alice')).toBe(token);
    expect(csrf.tokenFor('proxy:bob')).not.toBe(token);
    expect(
      new AdminCsrf(Object.assign(new AdminConfig(), { ADMIN_CSRF_SECRET: 'j'.repeat(32) })).tokenFor(
        'proxy:alice',
      ),
    ).not.toBe(token);
    // Without a configured key, each process draws its own.
    expect(new AdminCsrf(new AdminConfig()).tokenFor('proxy:alice')).not.toBe(
      new AdminCsrf(new AdminConfig()).tokenFor('proxy:alice'),
    );
  });

  it('passes a same-origin POST with the token, also from a client that sends neither Origin nor Sec-Fetch-Site', () => {
    expect(csrf.refusal(req(same, { [CSRF_FIELD]: token }), 'proxy:alice')).toBeNull();
    expect(
      csrf.refusal(req({ host: 'console.example:8443' }, { [CSRF_FIELD]: token }), 'proxy:alice'),
    ).toBeNull();
  });

  it('refuses another site, a null or foreign Origin, and a missing or wrong token', () => {
    const refused = (headers: Record<string, string>, body: Record<string, unknown>) =>
      csrf.refusal(req(headers, body), 'proxy:alice');
    expect(refused({ ...same, 'sec-fetch-site': 'cross-site' }, { [CSRF_FIELD]: token })).toMatch(
      /cross-site/,
    );
    expect(refused({ ...same, 'sec-fetch-site': 'same-site' }, { [CSRF_FIELD]: token })).toMatch(/same-site/);
    expect(refused({ ...same, origin: 'null' }, { [CSRF_FIELD]: token })).toMatch(/Origin/);
    expect(
      refused({ ...same, origin: 'https://console.example.evil:8443' }, { [CSRF_FIELD]: token }),
    ).toMatch(/Origin/);
    expect(refused({ ...same, origin: 'not a url' }, { [CSRF_FIELD]: token })).toMatch(/Origin/);
    expect(refused(same, {})).toMatch(/form token/);
    expect(refused(same, { [CSRF_FIELD]: csrf.tokenFor('proxy:bob') })).toMatch(/form token/);
    expect(refused(same, { [CSRF_FIELD]: [token, token] })).toMatch(/form token/);
  });
});
