import 'reflect-metadata';
import { plainToInstance } from 'class-transformer';
import { validateSync, type ValidationError } from 'class-validator';
import { AppConfig, CONFIG_KEYS } from './app-config.js';

export class ConfigValidationError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigValidationError';
  }
}

function flatten(errors: ValidationError[]): string[] {
  return errors.flatMap((e) => Object.values(e.constraints ?? {}).slice(0, 1));
}

/** Rules that involve more than one variable; each problem names the variables to set. */
const LOOPBACK_HOSTS = new Set(['localhost', '::1', '[::1]']);

/** Whether a host name or address only ever reaches this machine. */
export function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase();
  return LOOPBACK_HOSTS.has(h) || h.endsWith('.localhost') || /^127(\.\d{1,3}){3}$/.test(h);
}

function isPlainHttpOffLoopback(url: string | undefined): boolean {
  if (!url) return false;
  try {
    const u = new URL(url);
    return u.protocol === 'http:' && !isLoopbackHost(u.hostname);
  } catch {
    return false; // the schema already reported a malformed URL
  }
}

/** Rules that involve more than one variable; each problem names the variables to set. */
function crossFieldProblems(c: AppConfig): string[] {
  const problems: string[] = [];
  if (c.hasAuthProvider('oidc')) {
    if (!c.OIDC_ISSUER) problems.push('OIDC_ISSUER is required when AUTH_PROVIDERS includes oidc');
    if (!c.MCP_RESOURCE_URL) {
      problems.push(
        'MCP_RESOURCE_URL is required when AUTH_PROVIDERS includes oidc (the resource tokens are issued for)',
      );
    }
  }
  if (c.hasAuthProvider('proxy') && !c.AUTH_PROXY_SECRET) {
    problems.push('AUTH_PROXY_SECRET is required when AUTH_PROVIDERS includes proxy');
  }
  return problems.concat(c.isProduction ? productionProblems(c) : []);
}

/**
 * NODE_ENV=production refuses settings that are fine on a laptop and unsafe on a network. All of them are
 * reported together with the rest, so an operator fixes a deployment in one round.
 */
function productionProblems(c: AppConfig): string[] {
  const problems: string[] = [];
  if (c.AUTH_PROVIDERS.length === 0 && !isLoopbackHost(c.HOST)) {
    problems.push(
      `AUTH_PROVIDERS must name at least one of oidc, proxy, apikey when NODE_ENV=production and HOST=${c.HOST} ` +
        'is not a loopback address (the anonymous principal is for development only)',
    );
  }
  if (!c.DATABASE_URL) {
    problems.push(
      'DATABASE_URL is required when NODE_ENV=production (the embedded PostgreSQL is for development)',
    );
  }
  if (!c.METRICS_TOKEN && !c.METRICS_PUBLIC) {
    problems.push(
      'METRICS_TOKEN is required when NODE_ENV=production (or set METRICS_PUBLIC=true to serve /metrics openly)',
    );
  }
  if (!c.MCP_RESOURCE_URL) {
    problems.push(
      'MCP_RESOURCE_URL is required when NODE_ENV=production (the RFC 9728 document and 401 challenges must ' +
        'not be derived from the Host header)',
    );
  }
  if (isPlainHttpOffLoopback(c.OIDC_ISSUER)) {
    problems.push('OIDC_ISSUER must be an https URL when NODE_ENV=production (http only on loopback)');
  }
  if (isPlainHttpOffLoopback(c.OIDC_JWKS_URI)) {
    problems.push('OIDC_JWKS_URI must be an https URL when NODE_ENV=production (http only on loopback)');
  }
  if (c.OIDC_JWKS_COOLDOWN_MS === 0) {
    problems.push(
      'OIDC_JWKS_COOLDOWN_MS must not be 0 when NODE_ENV=production (every unknown kid would fetch the JWKS)',
    );
  }
  if (c.MCP_CONFORMANCE_FIXTURES) {
    problems.push('MCP_CONFORMANCE_FIXTURES must be false when NODE_ENV=production (test fixtures only)');
  }
  return problems;
}

export interface LoadConfigOptions {
  /**
   * false for the one-off tools that serve nothing (the migration command, the admin CLI, the TypeORM CLI):
   * every variable is still validated, but the HTTP server's refusals (authentication, the metrics token, the
   * public resource URL, the issuer's scheme, …) do not apply: an image that bakes NODE_ENV=production must
   * still run its migration with nothing but a DATABASE_URL. Default true.
   */
  serving?: boolean;
}

/**
 * Builds the typed configuration from an environment map. Unset and empty variables take the defaults
 * declared on AppConfig. Throws one ConfigValidationError naming every bad variable, so an operator fixes
 * them all in one go instead of one restart per typo.
 */
export function loadConfig(
  env: NodeJS.ProcessEnv | Record<string, string | undefined>,
  options: LoadConfigOptions = {},
): AppConfig {
  const plain: Record<string, string> = {};
  for (const key of CONFIG_KEYS) {
    const value = env[key];
    if (value !== undefined && value.trim() !== '') plain[key] = value;
  }
  const config = plainToInstance(AppConfig, plain, { exposeDefaultValues: true });
  // The example tools (one of them approves refunds) are a development aid: production opts in explicitly.
  if (plain.EXAMPLE_TOOLS === undefined) config.EXAMPLE_TOOLS = !config.isProduction;
  const errors = validateSync(config, { forbidUnknownValues: false });
  const problems = [...flatten(errors), ...(options.serving === false ? [] : crossFieldProblems(config))];
  if (problems.length > 0) throw new ConfigValidationError(problems);
  return config;
}
