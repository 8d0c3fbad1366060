import { buildBearerChallenge, requiredScopesMissing, resourceMetadataUrl } from './auth-challenges.js';
import { ANONYMOUS_PRINCIPAL, type Principal } from './principal.js';

const alice: Principal = {
  id: 'oidc:x',
  provider: 'oidc',
  subject: 'alice',
  scopes: ['tasks:read', 'tasks:write'],
  groups: [],
};

describe('scope checks and challenges', () => {
  it('lists the required scopes a principal lacks, once each', () => {
    expect(requiredScopesMissing(alice, ['tasks:read'])).toEqual([]);
    expect(requiredScopesMissing(alice, ['admin', 'tasks:write', 'admin'])).toEqual(['admin']);
    expect(requiredScopesMissing(alice, [])).toEqual([]);
  });

  it('never refuses the anonymous development principal for scopes', () => {
    expect(requiredScopesMissing(ANONYMOUS_PRINCIPAL, ['admin'])).toEqual([]);
  });

  it('inserts the resource path into the well-known metadata URL (RFC 9728 §3.1)', () => {
    expect(resourceMetadataUrl('https://mcp.example.com/mcp')).toBe(
      'https://mcp.example.com/.well-known/oauth-protected-resource/mcp',
    );
    expect(resourceMetadataUrl('https://mcp.example.com/public/mcp/')).toBe(
      'https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp',
    );
    expect(resourceMetadataUrl('https://mcp.example.com')).toBe(
      'https://mcp.example.com/.well-known/oauth-protected-resource',
    );
  });

  it('builds RFC 6750 challenges, quoting values and leaving out offline_access', () => {
    expect(buildBearerChallenge({ resourceMetadata: 'https://h/.well-known/oauth-protected-resource' })).toBe(
      'Bearer resource_metadata="https://h/.well-known/oauth-protected-resource"',
    );
    expect(
      buildBearerChallenge({
        resourceMetadata: 'https://h/m',
        scopes: ['a', 'offline_access', 'b'],
        error: 'insufficient_scope',
        errorDescription: 'needs "b"\nnow',
      }),
    ).toBe(
      'Bearer resource_metadata="https://h/m", scope="a b", error="insufficient_scope", error_description="needs \\"b\\" now"',
    );
  });
});
