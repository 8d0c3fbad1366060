import { loadConfig } from '../app.config.js';
import { ServerConfig } from '../config/server.config.js';
import { GatewayConfig } from './gateway.config.js';
import { OriginPolicy } from './origin-policy.js';

function policyFor(env: Record<string, string>): OriginPolicy {
  const config = loadConfig(env);
  return new OriginPolicy(config.get(GatewayConfig), config.get(ServerConfig));
}

describe('OriginPolicy', () => {
  it('on a loopback bind accepts only loopback Host and Origin values', () => {
    const p = policyFor({ HOST: '127.0.0.1' });
    expect(p.check('localhost:3000', undefined)).toBeUndefined();
    expect(p.check('127.0.0.1:3000', 'http://localhost:5173')).toBeUndefined();
    expect(p.check('[::1]:3000', 'http://[::1]:80')).toBeUndefined();
    expect(p.check('evil.example.com', undefined)).toMatch(/Host/);
    expect(p.check('localhost:3000', 'http://evil.example.com')).toMatch(/Origin/);
    expect(p.check('localhost:3000', 'null')).toMatch(/Origin/);
  });

  it('uses the configured allow-lists', () => {
    const p = policyFor({
      HOST: '0.0.0.0',
      MCP_ALLOWED_HOSTS: 'mcp.corp.example',
      MCP_ALLOWED_ORIGINS: 'https://app.corp.example',
    });
    expect(p.check('mcp.corp.example:443', 'https://app.corp.example')).toBeUndefined();
    expect(p.check('localhost', undefined)).toMatch(/Host/);
    expect(p.check('mcp.corp.example', 'https://other.example')).toMatch(/Origin/);
  });

  it('off loopback without lists accepts any Host but no browser Origin', () => {
    const p = policyFor({ HOST: '0.0.0.0' });
    expect(p.check('anything.example', undefined)).toBeUndefined();
    expect(p.check('anything.example', 'https://site.example')).toMatch(/Origin/);
  });
});
