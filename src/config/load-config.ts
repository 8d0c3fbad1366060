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
function crossFieldProblems(c: AppConfig): string[] {
  const problems: string[] = [];
  if (c.isProduction && c.AUTH_PROVIDERS.length === 0) {
    problems.push(
      'AUTH_PROVIDERS must name at least one of oidc, proxy, apikey when NODE_ENV=production ' +
        '(the anonymous principal is for development only)',
    );
  }
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
  return problems;
}

/**
 * Builds the typed configuration from an environment map. Unset and empty variables take the defaults
 * declared on AppConfig. Throws one ConfigValidationError naming every bad variable, so an operator fixes
 * them all in one go instead of one restart per typo.
 */
export function loadConfig(env: NodeJS.ProcessEnv | Record<string, string | undefined>): AppConfig {
  const plain: Record<string, string> = {};
  for (const key of CONFIG_KEYS) {
    const value = env[key];
    if (value !== undefined && value.trim() !== '') plain[key] = value;
  }
  const config = plainToInstance(AppConfig, plain, { exposeDefaultValues: true });
  const errors = validateSync(config, { forbidUnknownValues: false });
  if (errors.length > 0) throw new ConfigValidationError(flatten(errors));
  const problems = crossFieldProblems(config);
  if (problems.length > 0) throw new ConfigValidationError(problems);
  return config;
}
