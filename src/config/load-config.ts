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
  return config;
}
