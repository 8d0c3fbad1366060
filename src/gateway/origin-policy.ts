import type { ServerConfig } from '../config/server.config.js';
import type { GatewayConfig } from './gateway.config.js';
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

function hostnameOf(hostHeader: string): string {
  const h = hostHeader.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  const colon = h.lastIndexOf(':');
  return colon > 0 ? h.slice(0, colon) : h;
}

/**
 * DNS-rebinding defence for /mcp. A server bound to loopback accepts only loopback Host and Origin values
 * unless MCP_ALLOWED_HOSTS / MCP_ALLOWED_ORIGINS say otherwise; a server bound elsewhere checks Origin
 * (when a browser sends one) against MCP_ALLOWED_ORIGINS and Host against MCP_ALLOWED_HOSTS when set.
 */
export class OriginPolicy {
  private readonly loopbackOnly: boolean;
  private readonly hosts: Set<string>;
  private readonly origins: Set<string>;

  constructor(config: GatewayConfig, server: ServerConfig) {
    this.loopbackOnly = LOOPBACK_HOSTS.has(server.HOST.toLowerCase());
    this.hosts = new Set(config.MCP_ALLOWED_HOSTS.map((h) => h.toLowerCase()));
    this.origins = new Set(config.MCP_ALLOWED_ORIGINS.map((o) => o.toLowerCase().replace(/\/$/, '')));
  }

  /** Returns why the request is refused, or undefined when it may proceed. */
  check(host: string | undefined, origin: string | undefined): string | undefined {
    if (host !== undefined && !this.hostAllowed(host)) return `Forbidden: Host '${host}' is not allowed`;
    if (origin !== undefined && origin !== 'null' && !this.originAllowed(origin)) {
      return `Forbidden: Origin '${origin}' is not allowed`;
    }
    if (origin === 'null') return `Forbidden: Origin 'null' is not allowed`;
    return undefined;
  }

  private hostAllowed(host: string): boolean {
    const full = host.trim().toLowerCase();
    if (this.hosts.size > 0) return this.hosts.has(full) || this.hosts.has(hostnameOf(full));
    return !this.loopbackOnly || LOOPBACK_HOSTS.has(hostnameOf(full));
  }

  private originAllowed(origin: string): boolean {
    const o = origin.trim().toLowerCase().replace(/\/$/, '');
    if (this.origins.has(o)) return true;
    if (!this.loopbackOnly) return false;
    try {
      return (
        LOOPBACK_HOSTS.has(new URL(o).hostname.toLowerCase()) ||
        LOOPBACK_HOSTS.has(`[${new URL(o).hostname}]`)
      );
    } catch {
      return false;
    }
  }
}
