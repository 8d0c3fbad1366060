import 'reflect-metadata';
import type { Type } from '@nestjs/common';
import { plainToInstance } from 'class-transformer';
import { getMetadataStorage, validateSync, type ValidationError } from 'class-validator';
import { configSections, type ConfigContext } from './config-section.js';
import { envVariablesOf } from './env.decorators.js';
import { LoadedConfig } from './loaded-config.js';

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
 * The variables a config class reads: its `@Env` properties. A validated property without `@Env` would be
 * silently never read, so it is a programming error, caught at the first load (every test loads config).
 */
export function envKeysOf(cls: Type): string[] {
  const keys = envVariablesOf(cls).map((v) => v.name);
  const validated = getMetadataStorage()
    .getTargetValidationMetadatas(cls, '', true, false)
    .map((m) => m.propertyName);
  const undeclared = [...new Set(validated)].filter((p) => !keys.includes(p));
  if (undeclared.length > 0) {
    throw new Error(
      `${cls.name}: ${undeclared.join(', ')} validated but not declared with @Env(description)`,
    );
  }
  return keys;
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
 * Builds every registered module's config from an environment map, in one pass. Unset and empty variables
 * take the defaults their class declares. Throws one ConfigValidationError naming every bad variable of
 * every module, so an operator fixes them all in one go instead of one restart per typo.
 *
 * This validates the sections registered so far; entry points import `src/app.config.ts`, which registers
 * all of them.
 */
export function loadRegisteredConfig(
  env: NodeJS.ProcessEnv | Record<string, string | undefined>,
  options: LoadConfigOptions = {},
): LoadedConfig {
  const sections = configSections();
  const plain: Record<string, string> = {};
  const instances = new Map<Type, object>();
  for (const { cls } of sections) {
    const own: Record<string, string> = {};
    for (const key of envKeysOf(cls)) {
      const value = env[key];
      if (value !== undefined && value.trim() !== '') own[key] = plain[key] = value;
    }
    instances.set(cls, plainToInstance(cls, own, { exposeDefaultValues: true }));
  }
  const config = new LoadedConfig(instances);
  const ctx: ConfigContext = {
    get: (cls) => config.get(cls),
    isSet: (name) => plain[name] !== undefined,
  };
  const section = (cls: Type<object>): object => config.get(cls);
  for (const { cls, options: o } of sections) o.resolve?.(section(cls), ctx);
  const problems = sections.flatMap(({ cls }) =>
    flatten(validateSync(section(cls), { forbidUnknownValues: false })),
  );
  if (options.serving !== false) {
    for (const { cls, options: o } of sections) problems.push(...(o.checks?.(section(cls), ctx) ?? []));
  }
  if (problems.length > 0) throw new ConfigValidationError(problems);
  return config;
}

/** Every variable the registered sections read (for deployment checks: no unknown variable is set). */
export function registeredConfigKeys(): string[] {
  return configSections().flatMap(({ cls }) => envKeysOf(cls));
}
