import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { configKeys } from '../../src/app.config.js';
import { GatewayConfig } from '../../src/gateway/gateway.config.js';
import { LifecycleConfig } from '../../src/lifecycle/lifecycle.config.js';
import { DEPLOY_DIR } from '../support/deploy-files.js';
import { REPO_ROOT } from '../support/server-process.js';

interface Service {
  image?: string;
  build?: unknown;
  profiles?: string[];
  environment?: Record<string, string>;
  env_file?: string[];
  ports?: string[];
  volumes?: string[];
  stop_grace_period?: string;
  healthcheck?: unknown;
  depends_on?: Record<string, { condition: string }>;
}

/** `20s`, `1m30s` → seconds. */
function seconds(d: string): number {
  let total = 0;
  for (const [, n, unit] of d.matchAll(/(\d+)(h|m|s)/g)) total += Number(n) * { h: 3600, m: 60, s: 1 }[unit]!;
  return total;
}

/**
 * No Docker engine here: docker-compose.yml is checked by parsing it (merge keys resolved as Compose does)
 * and by the values that must agree with the app and with the nginx config.
 */
describe('docker-compose.yml', () => {
  const compose = parse(readFileSync(join(REPO_ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
    services: Record<string, Service>;
  };
  const services = compose.services;
  const scaleInstances = ['mcp1', 'mcp2', 'mcp3'];
  const defaults = { ...new LifecycleConfig(), ...new GatewayConfig() };
  const CONFIG_KEYS = configKeys();

  it('keeps the default stack (postgres + one instance) and puts the scale-out stack behind a profile', () => {
    expect(Object.keys(services).filter((n) => !services[n].profiles)).toEqual(['postgres', 'mcp']);
    for (const n of [...scaleInstances, 'lb', 'worker']) expect(services[n].profiles).toEqual(['scale']);
  });

  it('adds a task worker to the scale profile: same image, database and secrets, not behind nginx', () => {
    const worker = services.worker;
    expect(worker.environment!.INSTANCE_ROLE).toBe('worker');
    expect(worker.build).toEqual(services.mcp1.build);
    expect(worker.env_file).toEqual(['.env']);
    expect(worker.environment!.DATABASE_URL).toBe(services.mcp1.environment!.DATABASE_URL);
    for (const n of [...scaleInstances, 'mcp'])
      expect(services[n].environment!.INSTANCE_ROLE).toBeUndefined();
    expect(worker.ports).toBeUndefined();
    expect(Object.keys(services.lb.depends_on ?? {})).not.toContain('worker');
    const grace = Number(worker.environment!.SHUTDOWN_GRACE_MS ?? defaults.SHUTDOWN_GRACE_MS);
    expect(seconds(worker.stop_grace_period!)).toBeGreaterThan(grace / 1000);
    expect(worker.healthcheck).toEqual(services.mcp1.healthcheck);
  });

  it('passes only variables the config schema knows', () => {
    for (const [name, svc] of Object.entries(services)) {
      if (name === 'postgres' || name === 'lb') continue;
      for (const key of Object.keys(svc.environment ?? {}))
        expect([name, CONFIG_KEYS.includes(key)]).toEqual([name, true]);
    }
  });

  it('gives the three instances one database, secrets only from .env, and a stop grace above SHUTDOWN_GRACE_MS', () => {
    const envs = scaleInstances.map((n) => services[n].environment!);
    expect(new Set(envs.map((e) => e.DATABASE_URL)).size).toBe(1);
    // Secrets are never written (or defaulted) in the compose file; compose-boot.e2e-spec.ts resolves them.
    for (const n of [...scaleInstances, 'mcp']) {
      expect(services[n].env_file).toEqual(['.env']);
      for (const secret of ['MRTR_STATE_SECRET', 'METRICS_TOKEN', 'AUTH_PROXY_SECRET'])
        expect(services[n].environment![secret]).toBeUndefined();
    }
    for (const n of [...scaleInstances, 'mcp']) {
      const grace = Number(services[n].environment!.SHUTDOWN_GRACE_MS ?? defaults.SHUTDOWN_GRACE_MS);
      expect(seconds(services[n].stop_grace_period!)).toBeGreaterThan(grace / 1000);
      expect(services[n].healthcheck).toBeDefined();
    }
  });

  it('fronts exactly the three instances with nginx, round-robin, and mounts files that exist', () => {
    const lb = services.lb;
    expect(Object.keys(lb.depends_on ?? {}).sort()).toEqual(scaleInstances);
    const mounts = new Map(
      (lb.volumes ?? []).map((v) => {
        const [src, dst] = v.split(':');
        return [dst, src] as const;
      }),
    );
    for (const src of mounts.values()) expect(existsSync(join(REPO_ROOT, src))).toBe(true);
    const nginxConf = readFileSync(join(REPO_ROOT, mounts.get('/etc/nginx/nginx.conf')!), 'utf8');
    expect(nginxConf).toContain('include /etc/nginx/mcp-proxy.conf;');
    expect(mounts.get('/etc/nginx/mcp-proxy.conf')).toBe('./deploy/nginx/mcp-proxy.conf');
    // Each server line may carry parameters after its address (max_fails=0).
    const upstreams = [...nginxConf.matchAll(/^\s*server\s+([a-z0-9]+):(\d+)(?:\s+[^;]*)?;/gm)].map((m) => [
      m[1],
      m[2],
    ]);
    expect(upstreams).toEqual(scaleInstances.map((n) => [n, services[n].environment!.PORT]));
    const directives = nginxConf.replace(/#.*$/gm, '');
    expect(directives).not.toMatch(/\b(ip_hash|hash|sticky)\b/);
    const listen = /listen\s+(\d+);/.exec(nginxConf)![1];
    expect(lb.ports).toEqual([`${listen}:${listen}`]);
  });

  it('the proxy settings are SSE-safe', () => {
    const proxy = readFileSync(join(DEPLOY_DIR, 'nginx', 'mcp-proxy.conf'), 'utf8');
    const directive = (name: string): string | undefined =>
      new RegExp(`^\\s*${name}\\s+([^;]+);`, 'm').exec(proxy)?.[1].trim();
    expect(directive('proxy_buffering')).toBe('off');
    expect(directive('proxy_http_version')).toBe('1.1');
    expect(directive('proxy_set_header Connection')).toBe('""');
    expect(directive('proxy_pass')).toBe('http://mcp_servers');
    // Longer than the keep-alive comments on idle streams, with room to spare.
    const read = directive('proxy_read_timeout')!;
    expect(seconds(read)).toBeGreaterThan((10 * defaults.SSE_KEEPALIVE_MS) / 1000);
    expect(directive('proxy_next_upstream')).not.toMatch(/non_idempotent/);
  });
});
