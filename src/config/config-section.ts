import type { Type } from '@nestjs/common';

/** What a section's hooks may read besides their own values. */
export interface ConfigContext {
  /** Another module's config, already read (and, for `checks`, validated). */
  get<T>(cls: Type<T>): T;
  /** Whether the environment set the variable (a non-blank value). */
  isSet(name: string): boolean;
}

export interface ConfigSectionOptions<T> {
  /** The owning module, as the docs name it (`tasks`, `janitor`, …); sections are read and listed by it. */
  module: string;
  /** One line on what the section configures, for the generated docs. */
  summary: string;
  /** After every section is read and before validation: defaults that depend on another section. */
  resolve?(self: T, ctx: ConfigContext): void;
  /**
   * Rules involving several variables (or another module's), applied to a serving process only; each
   * problem names the variables to set. Reported together with every other problem.
   */
  checks?(self: T, ctx: ConfigContext): string[];
}

export interface RegisteredSection {
  cls: Type<object>;
  options: ConfigSectionOptions<object>;
}

const SECTIONS = new Map<Type<object>, ConfigSectionOptions<object>>();

/**
 * Registers a module's config class with the one loader. Importing the class file is enough: the loader
 * validates every registered section in one pass, and `ConfigModule.forRoot` provides each by its class.
 */
export function ConfigSection<T extends object>(options: ConfigSectionOptions<T>) {
  return (cls: Type<T>): void => {
    SECTIONS.set(cls, options);
  };
}

/** Every registered section, ordered by module then class name (independent of import order). */
export function configSections(): RegisteredSection[] {
  return [...SECTIONS.entries()]
    .map(([cls, options]) => ({ cls, options }))
    .sort((a, b) => a.options.module.localeCompare(b.options.module) || a.cls.name.localeCompare(b.cls.name));
}
